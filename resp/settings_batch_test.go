package resp

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

// TestConfigSetBatch: settings sharing a SettingBatch are recorded by Set
// and applied once, after every Set of the command; a refused Apply puts
// every value of the command back and names the setting.
func TestConfigSetBatch(t *testing.T) {
	// The server's goroutine writes these; the test reads them between
	// commands (mu: the race detector does not see the network's order).
	var mu sync.Mutex
	vals := map[string]string{"x-cert": "a", "x-key": "a"}
	pending := map[string]string{}
	applies := 0
	read := func(k string) string { mu.Lock(); defer mu.Unlock(); return vals[k] }
	batch := &SettingBatch{Apply: func() error {
		mu.Lock()
		defer mu.Unlock()
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
		return Setting{Name: name, Batch: batch, Get: func() string { return read(name) },
			Set: func(v string) error { mu.Lock(); defer mu.Unlock(); pending[name] = v; return nil }}
	}
	ts := startServer(t, func(c *Config) { c.Settings = append(c.Settings, setting("x-cert"), setting("x-key")) })
	c := ts.client(t, 2, "")
	ctx := context.Background()

	err := c.Do(ctx, "CONFIG", "SET", "x-cert", "b", "x-key", "b", "timeout", "7").Err()
	mu.Lock()
	n := applies
	mu.Unlock()
	if err != nil || n != 1 {
		t.Fatalf("CONFIG SET of a matching pair: %v, %d applies; want OK, 1", err, n)
	}
	if read("x-cert") != "b" || read("x-key") != "b" {
		t.Errorf("after CONFIG SET: %s, %s; want both b", read("x-cert"), read("x-key"))
	}
	err = c.Do(ctx, "CONFIG", "SET", "timeout", "9", "x-cert", "c").Err()
	if err == nil || !strings.Contains(err.Error(), "(possibly related to argument 'x-cert') - certificate and key do not match") {
		t.Errorf("CONFIG SET of a mismatched certificate: %v", err)
	}
	if got, _ := c.ConfigGet(ctx, "timeout").Result(); got["timeout"] != "7" {
		t.Errorf("timeout after a refused batch = %v; want 7 (put back)", got)
	}
	if got := read("x-cert"); got != "b" {
		t.Errorf("x-cert after a refused batch = %q; want b", got)
	}
}
