package resp

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestConfigSetBatch: settings sharing a SettingBatch are recorded by Set
// and applied once, after every Set of the command; a refused Apply puts
// every value of the command back and names the setting.
func TestConfigSetBatch(t *testing.T) {
	vals := map[string]string{"x-cert": "a", "x-key": "a"}
	pending := map[string]string{}
	applies := 0
	batch := &SettingBatch{Apply: func() error {
		applies++
		if pending["x-cert"] != pending["x-key"] {
			for k := range pending {
				delete(pending, k)
			}
			return errors.New("certificate and key do not match")
		}
		for k, v := range pending {
			vals[k] = v
		}
		return nil
	}}
	setting := func(name string) Setting {
		return Setting{Name: name, Batch: batch, Get: func() string { return vals[name] },
			Set: func(v string) error { pending[name] = v; return nil }}
	}
	ts := startServer(t, func(c *Config) { c.Settings = append(c.Settings, setting("x-cert"), setting("x-key")) })
	c := ts.client(t, 2, "")
	ctx := context.Background()

	if err := c.Do(ctx, "CONFIG", "SET", "x-cert", "b", "x-key", "b", "timeout", "7").Err(); err != nil || applies != 1 {
		t.Fatalf("CONFIG SET of a matching pair: %v, %d applies; want OK, 1", err, applies)
	}
	if vals["x-cert"] != "b" || vals["x-key"] != "b" {
		t.Errorf("after CONFIG SET: %v; want both b", vals)
	}
	err := c.Do(ctx, "CONFIG", "SET", "timeout", "9", "x-cert", "c").Err()
	if err == nil || !strings.Contains(err.Error(), "(possibly related to argument 'x-cert') - certificate and key do not match") {
		t.Errorf("CONFIG SET of a mismatched certificate: %v", err)
	}
	if got, _ := c.ConfigGet(ctx, "timeout").Result(); got["timeout"] != "7" {
		t.Errorf("timeout after a refused batch = %v; want 7 (put back)", got)
	}
	if vals["x-cert"] != "b" {
		t.Errorf("x-cert after a refused batch = %q; want b", vals["x-cert"])
	}
}
