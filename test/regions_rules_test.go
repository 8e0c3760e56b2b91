package test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/poll"
)

// TestRegionsRulesDecide: which region's limit-override and limit-shadow
// decide a key (docs/regions.md, "Whose rules decide"). Two standalone
// regions; r1 is the home of every global pattern. A global key is
// decided under its home's rules, whichever region the request entered by,
// and a shadow flag set where it entered travels with it; an async key is
// decided by each region's own rules, and a shadowed refusal is never
// shipped to the peers as consumption.
func TestRegionsRulesDecide(t *testing.T) {
	const policy = "sh:* global r1 hs:* global r1 os:* global r1 g:* global r1 as:* async"
	rs := startRegionSetEach(t, []string{"r1", "r2"}, 0, policy, map[string][]string{
		"r1": {"--limit-shadow", "sh:* hs:*", "--limit-override", "g:ab* 0 1 60"},
		"r2": {"--limit-shadow", "sh:* os:* as:*", "--limit-override", "as:* 0 1 60"},
	})
	cl := map[string]*redis.Client{}
	for _, n := range []string{"r1", "r2"} {
		cl[n] = redis.NewClient(&redis.Options{Addr: rs.srv[n].Addr, Protocol: 2})
		t.Cleanup(func() { cl[n].Close() })
	}
	// admitted sends n CL.THROTTLE key burst rate period through region
	// and counts the allowed answers.
	admitted := func(t *testing.T, region, key string, n, burst, rate, period int) int {
		t.Helper()
		got := 0
		for range n {
			v, err := regionThrottle(cl[region], t, key, burst, rate, period)
			if err != nil {
				t.Fatalf("CL.THROTTLE %s through %s: %v", key, region, err)
			}
			if v[0] == 0 {
				got++
			}
		}
		return got
	}

	// A global key with a shadow pattern at its home, where the request
	// entered, or both, answers allowed 5 of 5 through either region; with
	// none, the home enforces it (1 of 5).
	for _, tc := range []struct {
		key, region string
		want        int
	}{
		{"sh:x", "r2", 5}, // shadowed in both regions, entering at the non-home
		{"sh:y", "r1", 5}, // the same, entering at the home
		{"hs:x", "r2", 5}, // shadowed at the home only
		{"os:x", "r2", 5}, // shadowed where it entered only: the flag travels
		{"g:plain", "r2", 1},
	} {
		if got := admitted(t, tc.region, tc.key, 5, 0, 1, 60); got != tc.want {
			t.Errorf("5 × CL.THROTTLE %s 0 1 60 through %s admitted %d, want %d", tc.key, tc.region, got, tc.want)
		}
	}

	// The home's override holds through either region: 1 of 10.
	for _, region := range []string{"r1", "r2"} {
		key := "g:abuser-" + region
		if got := admitted(t, region, key, 10, 99, 100, 1); got != 1 {
			t.Errorf("10 × CL.THROTTLE %s 99 100 1 through %s admitted %d, want 1 (r1's limit-override g:ab* 0 1 60)", key, region, got)
		}
	}

	// An async key shadowed under a tighter override in r2: r2 answers all
	// ten allowed and counts nine shadow refusals; only the one request
	// the override admitted is shipped (60 s of the key's time at the
	// override's rate), not ten (600 s), and r1 admits the key again as
	// soon as that has drained below its own tolerance (0.6 s).
	before := shadowLimited(t, cl["r2"])
	if got := admitted(t, "r2", "as:k", 10, 99, 100, 60); got != 10 {
		t.Errorf("10 × CL.THROTTLE as:k 99 100 60 on r2 (shadowed) admitted %d, want 10", got)
	}
	if got := shadowLimited(t, cl["r2"]) - before; got != 9 {
		t.Errorf("r2 counted %d shadow refusals, want 9", got)
	}
	var reset int64
	poll.Until(t, 15*time.Second, func() error {
		v, err := cl["r1"].Do(ctxT(t), "CL.THROTTLE", "as:k", 99, 100, 60, 0).Result()
		if err != nil {
			return err
		}
		if reset = ints(t, v)[4]; reset == 0 {
			return fmt.Errorf("r1 holds none of r2's consumption of as:k yet")
		}
		return nil
	})
	if reset > 61 {
		t.Errorf("after r2's shipment r1's as:k resets in %d s, want at most 61 (one admitted request at 0 1 60; the nine shadow refusals consumed nothing)", reset)
	}
	poll.Until(t, 15*time.Second, func() error {
		v, err := regionThrottle(cl["r1"], t, "as:k", 99, 100, 60)
		if err != nil {
			return err
		}
		if v[0] != 0 {
			return fmt.Errorf("r1 refuses as:k: %v", v)
		}
		return nil
	})
}

// shadowLimited reads INFO stats shadow_limited.
func shadowLimited(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(ctxT(t), "stats").Result()
	if err != nil {
		t.Fatalf("INFO stats: %v", err)
	}
	n, err := strconv.ParseInt(parseInfo(info)["shadow_limited"], 10, 64)
	if err != nil {
		t.Fatalf("INFO stats shadow_limited: %v", err)
	}
	return n
}

// TestMigrateShadowedKey: MIGRATE moves a key's state, never a decision:
// a shadowed key moved to a server with the same rules keeps answering
// allowed, its refusals counted there, and the state that arrives is what
// the source held (its shadow refusals consumed nothing, the one request
// its override admitted did); an overridden key that is not shadowed stays
// refused after the move.
func TestMigrateShadowedKey(t *testing.T) {
	rules := []string{"--save", "", "--limit-shadow", "sh:*", "--limit-override", "sh:* 0 1 60 ov:* 0 1 60"}
	src, dst := startServer(t, rules...), startServer(t, rules...)
	sc := redis.NewClient(&redis.Options{Addr: src.Addr, Protocol: 2})
	dc := redis.NewClient(&redis.Options{Addr: dst.Addr, Protocol: 2})
	t.Cleanup(func() { sc.Close(); dc.Close() })
	admitted := func(c *redis.Client, key string) int {
		t.Helper()
		got := 0
		for range 5 {
			v, err := regionThrottle(c, t, key, 99, 100, 60)
			if err != nil {
				t.Fatalf("CL.THROTTLE %s: %v", key, err)
			}
			if v[0] == 0 {
				got++
			}
		}
		return got
	}
	before := shadowLimited(t, sc)
	if got := admitted(sc, "sh:k"); got != 5 {
		t.Errorf("source: sh:k (shadowed) admitted %d of 5, want 5", got)
	}
	if got := shadowLimited(t, sc) - before; got != 4 {
		t.Errorf("source counted %d shadow refusals, want 4", got)
	}
	if got := admitted(sc, "ov:k"); got != 1 {
		t.Errorf("source: ov:k (overridden to 0 1 60) admitted %d of 5, want 1", got)
	}
	if err := sc.Do(ctxT(t), "MIGRATE", "127.0.0.1", dst.Port, "", 0, 5000, "KEYS", "sh:k", "ov:k").Err(); err != nil {
		t.Fatalf("MIGRATE: %v", err)
	}
	if n, err := sc.Exists(ctxT(t), "sh:k", "ov:k").Result(); err != nil || n != 0 {
		t.Errorf("source EXISTS after MIGRATE = %d, %v; want 0", n, err)
	}
	before = shadowLimited(t, dc)
	if got := admitted(dc, "sh:k"); got != 5 {
		t.Errorf("target: sh:k (shadowed) admitted %d of 5 after the move, want 5", got)
	}
	if got := shadowLimited(t, dc) - before; got != 5 {
		t.Errorf("target counted %d shadow refusals, want 5 (the moved state holds the source's one admitted request)", got)
	}
	if got := admitted(dc, "ov:k"); got != 0 {
		t.Errorf("target: ov:k admitted %d of 5 after the move, want 0 (the moved state holds the source's admitted request)", got)
	}
}
