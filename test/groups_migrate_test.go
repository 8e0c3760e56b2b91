package test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/poll"
)

// redisDump is what Redis 7.0 answers to DUMP of the string "bar": an RDB
// payload (version 10, CRC64), which cellserver must refuse to RESTORE.
const redisDump = "\x00\x03bar\x0a\x00\xe6\xbe\x49\x60\xee\x66\xfd\x17"

// asking runs ASKING then args on one connection of c, as a client
// following -ASK does.
func asking(ctx context.Context, c *redis.Client, args ...any) *redis.Cmd {
	conn := c.Conn()
	defer conn.Close()
	if err := conn.Do(ctx, "ASKING").Err(); err != nil {
		cmd := redis.NewCmd(ctx, args...)
		cmd.SetErr(fmt.Errorf("ASKING: %w", err))
		return cmd
	}
	return conn.Do(ctx, args...)
}

// One slot moved by hand, step by step as redis-cli --cluster does it:
// SETSLOT IMPORTING on b and MIGRATING on a; a key of the slot that a no
// longer has answers -ASK naming b, and b serves it only after ASKING; a
// CL.THROTTLEALL over a moved and a remaining key answers -TRYAGAIN;
// DUMP / RESTORE carry a key's limiter state and a Redis RDB payload is
// refused; MIGRATE moves an exhausted key, still exhausted; SETSLOT NODE
// ends the move, and every node then names b's leader for the slot.
func TestGroupsManualMigration(t *testing.T) {
	groups := startGroups(t, 2)
	a, b := groups[0], groups[1]
	al, bl := a.leader(t), b.leader(t)
	ctx := ctxT(t)
	tag := ""
	for i := 0; tag == ""; i++ {
		if s := "{m" + strconv.Itoa(i) + "}"; a.owns(keySlot(s)) {
			tag = s
		}
	}
	slot := keySlot(tag)
	exhausted, remaining, absent := tag+"exhausted", tag+"remaining", tag+"absent"
	ac, bc := noRetryClient(t, al.Addr), noRetryClient(t, bl.Addr)
	for i, want := range []int64{0, 1} {
		if v, err := throttle(ctx, ac, exhausted, 0, 1, 600); err != nil || v[0] != want {
			t.Fatalf("CL.THROTTLE %s 0 1 600 (request %d) = %v, %v; want limited=%d", exhausted, i+1, v, err, want)
		}
	}
	if v, err := throttle(ctx, ac, remaining, 9, 1, 600); err != nil || v[0] != 0 {
		t.Fatalf("CL.THROTTLE %s = %v, %v; want allowed", remaining, v, err)
	}

	// The refusal of a Redis payload and the round trip of cellserver's.
	if err := ac.Restore(ctx, tag+"rdb", 0, redisDump).Err(); err == nil || !strings.HasPrefix(err.Error(), "ERR ") {
		t.Errorf("RESTORE of a Redis RDB payload = %v, want an ERR refusal", err)
	} else {
		t.Logf("RESTORE of a Redis RDB payload: %v", err)
	}
	payload, err := ac.Dump(ctx, exhausted).Result()
	if err != nil || payload == "" {
		t.Fatalf("DUMP %s = %q, %v", exhausted, payload, err)
	}
	if err := ac.Restore(ctx, tag+"copy", 0, payload).Err(); err != nil {
		t.Fatalf("RESTORE %scopy of DUMP %s = %v, want OK", tag, exhausted, err)
	}
	if v, err := throttle(ctx, ac, tag+"copy", 0, 1, 600); err != nil || v[0] != 1 {
		t.Errorf("CL.THROTTLE %scopy (restored from an exhausted key) = %v, %v; want limited", tag, v, err)
	}
	if err := ac.Restore(ctx, tag+"copy", 0, payload).Err(); err == nil || !strings.HasPrefix(err.Error(), "BUSYKEY") {
		t.Errorf("RESTORE over an existing key = %v, want BUSYKEY", err)
	}
	if err := ac.Restore(ctx, tag+"bad", 0, payload[:len(payload)-1]+"x").Err(); err == nil {
		t.Errorf("RESTORE of a payload with a wrong checksum = OK, want a refusal")
	}

	// Open the slot.
	clusterDo(t, bl, "CLUSTER", "SETSLOT", slot, "IMPORTING", a.cid(al))
	clusterDo(t, al, "CLUSTER", "SETSLOT", slot, "MIGRATING", b.cid(bl))
	wantAsk := fmt.Sprintf("ASK %d %s", slot, bl.Addr)
	if _, err := throttle(ctx, ac, absent, 0, 1, 600); err == nil || err.Error() != wantAsk {
		t.Errorf("CL.THROTTLE %s (not in a, slot migrating) on a = %v, want %q", absent, err, wantAsk)
	}
	if v, err := throttle(ctx, ac, exhausted, 0, 1, 600); err != nil || v[0] != 1 {
		t.Errorf("CL.THROTTLE %s (still in a, slot migrating) on a = %v, %v; want limited", exhausted, v, err)
	}
	wantMoved := fmt.Sprintf("MOVED %d %s", slot, al.Addr)
	if _, err := throttle(ctx, bc, absent, 0, 1, 600); err == nil || err.Error() != wantMoved {
		t.Errorf("CL.THROTTLE %s on b without ASKING = %v, want %q", absent, err, wantMoved)
	}
	if v, err := asking(ctx, bc, "CL.THROTTLE", absent, 0, 1, 600).Int64Slice(); err != nil || v[0] != 0 {
		t.Errorf("ASKING + CL.THROTTLE %s on b = %v, %v; want allowed", absent, v, err)
	}

	// Move the exhausted key.
	if err := ac.Do(ctx, "MIGRATE", "127.0.0.1", bl.Port, "", 0, 5000, "KEYS", exhausted).Err(); err != nil {
		t.Fatalf("MIGRATE 127.0.0.1 %d \"\" 0 5000 KEYS %s = %v, want OK", bl.Port, exhausted, err)
	}
	if _, err := throttle(ctx, ac, exhausted, 0, 1, 600); err == nil || err.Error() != wantAsk {
		t.Errorf("CL.THROTTLE %s on a after MIGRATE = %v, want %q", exhausted, err, wantAsk)
	}
	if v, err := asking(ctx, bc, "CL.THROTTLE", exhausted, 0, 1, 600).Int64Slice(); err != nil || v[0] != 1 {
		t.Errorf("ASKING + CL.THROTTLE %s on b after MIGRATE = %v, %v; want still limited", exhausted, v, err)
	}
	err = ac.Do(ctx, "CL.THROTTLEALL", exhausted, 0, 1, 600, 1, remaining, 9, 1, 600, 1).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "TRYAGAIN ") {
		t.Errorf("CL.THROTTLEALL over a moved and a remaining key of slot %d = %v, want TRYAGAIN", slot, err)
	}

	// Move the rest, and close the slot on both sides.
	for _, k := range []string{remaining, tag + "copy"} {
		if err := ac.Do(ctx, "MIGRATE", "127.0.0.1", bl.Port, "", 0, 5000, "KEYS", k).Err(); err != nil {
			t.Fatalf("MIGRATE … KEYS %s = %v, want OK", k, err)
		}
	}
	clusterDo(t, bl, "CLUSTER", "SETSLOT", slot, "NODE", b.cid(bl))
	clusterDo(t, al, "CLUSTER", "SETSLOT", slot, "NODE", b.cid(bl))
	start := time.Now()
	poll.Until(t, 20*time.Second, func() error {
		for _, nd := range allNodes(groups) {
			if got, err := slotMaster(nd, slot); err != nil || got != bl.Addr {
				return fmt.Errorf("%s: master of slot %d = %q, %v; want %s", nd.id, slot, got, err, bl.Addr)
			}
		}
		return nil
	})
	t.Logf("every node named b's leader for slot %d %v after SETSLOT NODE", slot, time.Since(start))
	if v, err := throttle(ctx, bc, exhausted, 0, 1, 600); err != nil || v[0] != 1 {
		t.Errorf("CL.THROTTLE %s on b after the move = %v, %v; want still limited", exhausted, v, err)
	}
	if _, err := throttle(ctx, ac, exhausted, 0, 1, 600); err == nil || err.Error() != fmt.Sprintf("MOVED %d %s", slot, bl.Addr) {
		t.Errorf("CL.THROTTLE %s on a after the move = %v, want MOVED to b", exhausted, err)
	}
	if got := groupKeys(t, a, tag+"*"); len(got) != 0 {
		t.Errorf("group a still holds %v", got)
	}
	if got := groupKeys(t, b, tag+"*"); len(got) != 4 {
		t.Errorf("group b holds %v, want %s, %s, %s and %scopy", got, exhausted, remaining, absent, tag)
	}
}
