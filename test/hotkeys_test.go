package test

import (
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestHotkeys: 10 of 100,000 keys take 90% of a million limiter requests;
// redis-cli --hotkeys lists those 10, LIMITER TOP LIMITED names the five
// of them that are limited with counts within the stated error, and INFO
// hotkeys shows them.
func TestHotkeys(t *testing.T) {
	s := startServer(t)
	ctx := context.Background()
	c := s.client(t, 2)

	const cold, hot, perHot = 100000, 10, 90000
	// hot:0..4 allow one request an hour (the rest limited); hot:5..9
	// allow everything.
	send := func(keys []string) {
		for i := 0; i < len(keys); i += 5000 {
			p := c.Pipeline()
			for _, k := range keys[i:min(i+5000, len(keys))] {
				burst := "1000000"
				if strings.HasPrefix(k, "hot:") && k[4] < '5' {
					burst = "0"
				}
				p.Do(ctx, "CL.THROTTLE", k, burst, "1", "3600")
			}
			if _, err := p.Exec(ctx); err != nil {
				t.Error(err)
				return
			}
		}
	}
	var wg sync.WaitGroup
	var coldKeys []string
	for i := range cold {
		coldKeys = append(coldKeys, "cold:"+strconv.Itoa(i))
	}
	wg.Go(func() { send(coldKeys) })
	for w := range 2 {
		wg.Go(func() {
			var ks []string
			for i := range hot * perHot / 2 {
				ks = append(ks, "hot:"+strconv.Itoa((i+w)%hot))
			}
			send(ks)
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// LIMITER TOP LIMITED: hot:0..4, each limited perHot-1 times.
	top, err := c.Do(ctx, "LIMITER", "TOP", "LIMITED", "COUNT", "5").Slice()
	if err != nil || len(top) != 5 {
		t.Fatalf("LIMITER TOP LIMITED COUNT 5 = %v, %v", top, err)
	}
	for _, e := range top {
		f := e.([]any)
		key, cmd, count, errBound := f[0].(string), f[1].(string), f[2].(int64), f[3].(int64)
		if !regexp.MustCompile(`^hot:[0-4]$`).MatchString(key) || cmd != "cl.throttle" {
			t.Errorf("LIMITER TOP LIMITED lists %s (%s), want hot:0..4 (cl.throttle)", key, cmd)
		}
		if truth := int64(perHot - 1); truth > count+errBound || truth < count-errBound {
			t.Errorf("%s: limited %d times, outside the stated %d ± %d", key, truth, count, errBound)
		}
	}
	req, err := c.Do(ctx, "LIMITER", "TOP", "COUNT", "10").Slice()
	if err != nil || len(req) != 10 {
		t.Fatalf("LIMITER TOP COUNT 10 = %v, %v", req, err)
	}
	for _, e := range req {
		if k := e.([]any)[0].(string); !strings.HasPrefix(k, "hot:") {
			t.Errorf("LIMITER TOP (requested) lists %s among the first 10", k)
		}
	}
	if n, err := c.Do(ctx, "OBJECT", "FREQ", "hot:7").Int64(); err != nil || n < perHot/2 || n > 2*perHot {
		t.Errorf("OBJECT FREQ hot:7 = %d, %v; want about %d", n, err, perHot)
	}
	info := parseInfo(c.Info(ctx, "hotkeys").Val())
	if info["hotkeys_capacity"] != "1024" || !strings.HasPrefix(info["limited_0"], `key="hot:`) {
		t.Errorf("INFO hotkeys = %v", info)
	}

	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("redis-cli not installed (scripts/test.sh installs it)")
	}
	out, err := exec.Command("redis-cli", "-p", strconv.Itoa(s.Port), "--hotkeys").CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --hotkeys: %v\n%s", err, out)
	}
	// The summary: "hot key found with counter: N\tkeyname: "hot:3"".
	found := map[string]bool{}
	for _, m := range regexp.MustCompile(`hot key found with counter: (\d+)\s+keyname: "?([^"\n]+)"?`).FindAllStringSubmatch(string(out), -1) {
		n, _ := strconv.Atoi(m[1])
		if strings.HasPrefix(m[2], "hot:") && n >= perHot/2 {
			found[m[2]] = true
		}
	}
	for i := range hot {
		if k := "hot:" + strconv.Itoa(i); !found[k] {
			t.Errorf("redis-cli --hotkeys does not list %s:\n%s", k, out)
		}
	}

	// Off: OBJECT FREQ says so; on again: empty.
	if err := c.ConfigSet(ctx, "hotkeys-capacity", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "OBJECT", "FREQ", "hot:1").Err(); err == nil || !strings.Contains(err.Error(), "not tracked") {
		t.Errorf("OBJECT FREQ with hotkeys off: %v", err)
	}
}
