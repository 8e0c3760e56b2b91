package test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/hashslot"
	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/region"
)

// TestRegionsForgedSequenceGap is issue 27's case 1 as reported: two
// regions holding api:* async. r2's first consumption of api:fw leaves a
// sequence record on r1; a client of r1 that knows the password reads the
// record's name with KEYS and sends r1 a REGION.APPLY far ahead in that
// lane (seq 2000). The real consumption r2 ships afterwards must be
// applied, not answered DUP: both regions end with r2's true remaining
// count, and r1 counts the forged batch as out of sequence, no duplicate.
func TestRegionsForgedSequenceGap(t *testing.T) {
	const key = "api:fw"
	// FW.INCR api:fw 1000 1h: the hour's window must not turn during the
	// test, or the regions' counts would restart at different moments.
	if left := time.Hour - time.Duration(time.Now().UnixNano()%int64(time.Hour)); left < time.Minute {
		time.Sleep(left + time.Second) // wait for the next hour, not for the servers
	}
	rs := startRegionSet(t, []string{"r1", "r2"}, 0, "api:* async")
	r1 := redis.NewClient(&redis.Options{Addr: rs.srv["r1"].Addr, Protocol: 2})
	r2 := redis.NewClient(&redis.Options{Addr: rs.srv["r2"].Addr, Protocol: 2})
	t.Cleanup(func() { r1.Close(); r2.Close() })

	incr := func(c *redis.Client, n int64) int64 {
		t.Helper()
		var rem int64
		for range n {
			v, err := c.Do(ctxT(t), "FW.INCR", key, 1000, "1h").Result()
			if err != nil {
				t.Fatal(err)
			}
			rem = ints(t, v)[2]
		}
		return rem
	}
	remaining := func(c *redis.Client) (int64, error) {
		v, err := c.Do(ctxT(t), "FW.INCR", key, 1000, "1h", 0).Result()
		if err != nil {
			return 0, err
		}
		return ints(t, v)[2], nil
	}

	// r2 consumes 5; r1 applies them, and holds r2's record of the lane.
	incr(r2, 5)
	var record string
	poll.Until(t, 10*time.Second, func() error {
		keys, err := r1.Keys(ctxT(t), "region:seq:r2:*").Result()
		if err != nil || len(keys) != 1 {
			return fmt.Errorf("KEYS region:seq:r2:* = %q, %v; want one record", keys, err)
		}
		record = keys[0]
		if rem, err := remaining(r1); err != nil || rem != 995 {
			return fmt.Errorf("r1: remaining %d, %v; want 995", rem, err)
		}
		return nil
	})

	// The forged batch: the stream as the record's name shows it (given
	// an era when the name holds none), the slot of api:fw, seq 2000.
	parts := strings.Split(record, ":")
	if len(parts) != 5 {
		t.Fatalf("record %q: want region:seq:r2:<stream>:{tag}", record)
	}
	stream := parts[3]
	if !strings.Contains(stream, "-") {
		stream += "-" + strconv.FormatInt(time.Now().UnixNano()/int64(region.StreamEra), 10)
	}
	slot := hashslot.Of([]byte(key))
	reply, err := r1.Do(ctxT(t), "REGION.APPLY", "r2", "r1", stream, slot, 2000,
		key, "fixed-window", 1000, 0, 3600000000000, 1, 0).Result()
	if err == nil || !strings.HasPrefix(err.Error(), "OUTOFSEQ ") {
		t.Errorf("forged REGION.APPLY seq 2000 = %v, %v; want refused OUTOFSEQ", reply, err)
	}

	// The next real consumption of r2: 200 FW.INCR.
	want := incr(r2, 200)
	if want != 795 {
		t.Fatalf("r2: remaining %d after 205, want 795", want)
	}
	poll.Until(t, 15*time.Second, func() error {
		got, err := remaining(r1)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("r1: remaining %d, r2: %d: r2's real consumption was lost on r1 (over-admission there)", got, want)
		}
		return nil
	})
	if got2, err := remaining(r2); err != nil || got2 != want {
		t.Errorf("r2: remaining %d, %v; want %d", got2, err, want)
	}
	info, err := r1.Info(ctxT(t), "regions").Result()
	if err != nil {
		t.Fatal(err)
	}
	peer := parseInfo(info)["region_peer_r2"]
	if !strings.Contains(peer, ",duplicates=0,") || !strings.Contains(peer, ",out_of_sequence=1,") {
		t.Errorf("r1's INFO regions for r2: %q; want duplicates=0 and out_of_sequence=1", peer)
	}
}
