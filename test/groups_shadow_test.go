package test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/poll"
)

// TestGroupsMigrateShadowedKey: MIGRATE of a shadowed key between a
// cluster's groups keeps its behaviour. Both groups run the same rules
// (limit-shadow "sh*", limit-override "sh* 0 1 60": one request a
// minute); a key under them in group a answers allowed, its refusals
// counted as shadow there; moved to group b, its next requests answer
// allowed too and are counted as shadow-limited in b — the moved state
// holds a's one admitted request, so every one of them is a refusal.
func TestGroupsMigrateShadowedKey(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six processes")
	}
	groups := startGroups(t, 2, "--limit-shadow", "sh*", "--limit-override", "sh* 0 1 60")
	a, b := groups[0], groups[1]
	al, bl := a.leader(t), b.leader(t)
	ctx := ctxT(t)
	key := ""
	for i := 0; key == ""; i++ {
		if k := "sh{m" + strconv.Itoa(i) + "}"; a.owns(keySlot(k)) {
			key = k
		}
	}
	slot := keySlot(key)
	ac, bc := noRetryClient(t, al.Addr), noRetryClient(t, bl.Addr)
	admitted := func(c *redis.Client, where string) int {
		t.Helper()
		got := 0
		for range 5 {
			v, err := throttle(ctx, c, key, 99, 100, 60)
			if err != nil {
				t.Fatalf("CL.THROTTLE %s on %s: %v", key, where, err)
			}
			if v[0] == 0 {
				got++
			}
		}
		return got
	}

	before := shadowLimited(t, ac)
	if got := admitted(ac, "a"); got != 5 {
		t.Errorf("a: %s (shadowed) admitted %d of 5, want 5", key, got)
	}
	if got := shadowLimited(t, ac) - before; got != 4 {
		t.Errorf("a counted %d shadow refusals, want 4", got)
	}

	// Move the key's slot to b, as redis-cli --cluster does.
	clusterDo(t, bl, "CLUSTER", "SETSLOT", slot, "IMPORTING", a.cid(al))
	clusterDo(t, al, "CLUSTER", "SETSLOT", slot, "MIGRATING", b.cid(bl))
	if err := ac.Do(ctx, "MIGRATE", "127.0.0.1", bl.Port, "", 0, 5000, "KEYS", key).Err(); err != nil {
		t.Fatalf("MIGRATE … KEYS %s = %v, want OK", key, err)
	}
	clusterDo(t, bl, "CLUSTER", "SETSLOT", slot, "NODE", b.cid(bl))
	clusterDo(t, al, "CLUSTER", "SETSLOT", slot, "NODE", b.cid(bl))
	poll.Until(t, 20*time.Second, func() error {
		if got, err := slotMaster(bl, slot); err != nil || got != bl.Addr {
			return fmt.Errorf("b's leader names %q, %v for slot %d; want itself", got, err, slot)
		}
		return nil
	})

	before = shadowLimited(t, bc)
	if got := admitted(bc, "b"); got != 5 {
		t.Errorf("b: %s (shadowed) admitted %d of 5 after the move, want 5", key, got)
	}
	if got := shadowLimited(t, bc) - before; got != 5 {
		t.Errorf("b counted %d shadow refusals, want 5 (the moved state holds a's one admitted request)", got)
	}
}
