package test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/poll"
)

// acquireReply is CC.ACQUIRE's reply: the five limiter fields and the
// lease (empty for nil).
type acquireReply struct {
	f     [5]int64
	lease string
	nilID bool
}

func (r acquireReply) String() string {
	if r.nilID {
		return fmt.Sprintf("%v nil", r.f)
	}
	return fmt.Sprintf("%v %q", r.f, r.lease)
}

// ccAcquire sends CC.ACQUIRE and decodes its six-element reply.
func ccAcquire(t *testing.T, c *redis.Client, args ...any) acquireReply {
	t.Helper()
	r, err := ccAcquireErr(ctxT(t), c, args...)
	if err != nil {
		t.Fatalf("CC.ACQUIRE %v: %v", args, err)
	}
	return r
}

func ccAcquireErr(ctx context.Context, c *redis.Client, args ...any) (acquireReply, error) {
	var r acquireReply
	v, err := c.Do(ctx, append([]any{"CC.ACQUIRE"}, args...)...).Slice()
	if err != nil {
		return r, err
	}
	if len(v) != 6 {
		return r, fmt.Errorf("reply %v: want 6 elements", v)
	}
	for i := range 5 {
		n, ok := v[i].(int64)
		if !ok {
			return r, fmt.Errorf("reply element %d = %#v, want an integer", i, v[i])
		}
		r.f[i] = n
	}
	switch id := v[5].(type) {
	case nil:
		r.nilID = true
	case string:
		r.lease = id
	default:
		return r, fmt.Errorf("lease %#v, want a bulk string or nil", v[5])
	}
	return r, nil
}

// ccInt sends CC.RELEASE or CC.RENEW and returns its integer reply.
func ccInt(t *testing.T, c *redis.Client, args ...any) int64 {
	t.Helper()
	n, err := c.Do(ctxT(t), args...).Int64()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return n
}

// TestLeases: the contract's in-flight limits on a standalone server: two
// of max 2 held, the third limited (retry_after > 0, no lease); release
// answers 1 then 0 and frees a unit; an ID acquired twice holds one unit;
// WRONGTYPE both ways; CL.INSPECT shows the leases.
func TestLeases(t *testing.T) {
	s := startServer(t, "--save", "")
	for _, proto := range []int{2, 3} {
		t.Run("RESP"+strconv.Itoa(proto), func(t *testing.T) {
			c := s.client(t, proto)
			key := "cc:" + strconv.Itoa(proto)
			a := ccAcquire(t, c, key, 2, "30s")
			if a.f != [5]int64{0, 2, 1, -1, 30000} || a.nilID || a.lease == "" {
				t.Fatalf("CC.ACQUIRE %s 2 30s = %v, want [0 2 1 -1 30000] and a lease", key, a)
			}
			b := ccAcquire(t, c, key, 2, "30s")
			if b.f[0] != 0 || b.f[2] != 0 || b.lease == "" || b.lease == a.lease {
				t.Fatalf("second CC.ACQUIRE = %v, want allowed, remaining 0, a lease other than %q", b, a.lease)
			}
			third := ccAcquire(t, c, key, 2, "30s")
			if third.f[0] != 1 || third.f[2] != 0 || third.f[3] <= 0 || third.f[3] > 30000 || !third.nilID {
				t.Fatalf("third CC.ACQUIRE = %v, want limited, remaining 0, 0 < retry_after <= 30000, nil lease", third)
			}
			if n := ccInt(t, c, "CC.RELEASE", key, a.lease); n != 1 {
				t.Fatalf("CC.RELEASE %s %s = %d, want 1", key, a.lease, n)
			}
			if n := ccInt(t, c, "CC.RELEASE", key, a.lease); n != 0 {
				t.Fatalf("CC.RELEASE twice = %d, want 0", n)
			}
			if n := ccInt(t, c, "CC.RELEASE", key, "never-held"); n != 0 {
				t.Fatalf("CC.RELEASE of an unknown lease = %d, want 0", n)
			}
			// The released unit serves again; an ID acquired twice holds
			// one unit (the retry after a lost reply).
			for i := range 2 {
				r := ccAcquire(t, c, key, 2, "30s", "ID", "job-7")
				if r.f[0] != 0 || r.f[2] != 0 || r.lease != "job-7" {
					t.Fatalf("CC.ACQUIRE ... ID job-7 (#%d) = %v, want allowed, remaining 0, lease job-7", i+1, r)
				}
			}
			if n := ccInt(t, c, "CC.RENEW", key, "job-7", "60s"); n != 1 {
				t.Fatalf("CC.RENEW job-7 = %d, want 1", n)
			}
			if n := ccInt(t, c, "CC.RENEW", key, a.lease, "60s"); n != 0 {
				t.Fatalf("CC.RENEW of a released lease = %d, want 0", n)
			}
			insp, err := c.Do(ctxT(t), "CL.INSPECT", key).Result()
			if err != nil {
				t.Fatalf("CL.INSPECT: %v", err)
			}
			if got := fmt.Sprint(insp); !containsAll(got, "concurrency", b.lease, "job-7") {
				t.Fatalf("CL.INSPECT %s = %s, want the algorithm and both leases", key, got)
			}
			// WRONGTYPE both ways.
			if err := c.Do(ctxT(t), "TB.TAKE", key, 10, 1, "1s").Err(); err == nil || err.Error() != "WRONGTYPE Operation against a key holding the wrong kind of value" {
				t.Fatalf("TB.TAKE on a concurrency key = %v, want WRONGTYPE", err)
			}
			tb := key + ":tb"
			if err := c.Do(ctxT(t), "TB.TAKE", tb, 10, 1, "1s").Err(); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]any{{"CC.ACQUIRE", tb, 2, "1s"}, {"CC.RELEASE", tb, "x"}, {"CC.RENEW", tb, "x", "1s"}} {
				if err := c.Do(ctxT(t), args...).Err(); err == nil || err.Error() != "WRONGTYPE Operation against a key holding the wrong kind of value" {
					t.Fatalf("%v on a token bucket = %v, want WRONGTYPE", args, err)
				}
			}
			if typ, err := c.Type(ctxT(t), key).Result(); err != nil || typ != "concurrency" {
				t.Fatalf("TYPE %s = %q, %v; want concurrency", key, typ, err)
			}
		})
	}
	// LIMITER TOP counts refused acquires under cc.acquire (it samples one
	// decision in 32, so a few thousand).
	c := s.client(t, 2)
	p := c.Pipeline()
	for i := range 3200 {
		p.Do(ctxT(t), "CC.ACQUIRE", "cc:top", 1, "60s", "ID", strconv.Itoa(i))
	}
	if _, err := p.Exec(ctxT(t)); err != nil {
		t.Fatalf("pipelined CC.ACQUIRE: %v", err)
	}
	top, err := c.Do(ctxT(t), "LIMITER", "TOP", "LIMITED", "COUNT", "10").Slice()
	if err != nil {
		t.Fatalf("LIMITER TOP LIMITED: %v", err)
	}
	if got := fmt.Sprint(top); !containsAll(got, "cc:top cc.acquire") {
		t.Errorf("LIMITER TOP LIMITED = %s, want cc:top under cc.acquire", got)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		found := false
		for i := 0; i+len(x) <= len(s); i++ {
			if s[i:i+len(x)] == x {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// TestLeaseExpires: a lease with ttl 300ms frees itself (a crashed holder),
// the key goes when nothing is held, and INFO counts it expired unreleased.
func TestLeaseExpires(t *testing.T) {
	s := startServer(t, "--save", "")
	c := s.client(t, 2)
	if r := ccAcquire(t, c, "cc:ttl", 1, "300ms"); r.f[0] != 0 {
		t.Fatalf("CC.ACQUIRE cc:ttl 1 300ms = %v, want allowed", r)
	}
	if r := ccAcquire(t, c, "cc:ttl", 1, "300ms"); r.f[0] != 1 || r.f[3] <= 0 || r.f[3] > 300 {
		t.Fatalf("second CC.ACQUIRE = %v, want limited with 0 < retry_after <= 300", r)
	}
	poll.Until(t, 10*time.Second, func() error {
		if r := ccAcquire(t, c, "cc:ttl:probe", 1, "1s"); r.f[0] != 0 {
			return fmt.Errorf("probe refused: %v", r)
		}
		if n, err := c.Exists(ctxT(t), "cc:ttl").Result(); err != nil || n != 0 {
			return fmt.Errorf("EXISTS cc:ttl = %d, %v; want 0 once the lease expired", n, err)
		}
		return nil
	})
	if r := ccAcquire(t, c, "cc:ttl", 1, "300ms"); r.f[0] != 0 || r.lease == "" {
		t.Fatalf("CC.ACQUIRE after the ttl = %v, want allowed with a lease", r)
	}
	poll.Until(t, 10*time.Second, func() error {
		// Reclaimed lazily by a touch or by the sweeper.
		c.Exists(ctxT(t), "cc:ttl")
		info, err := c.Info(ctxT(t), "stats").Result()
		if err != nil {
			return err
		}
		if n, _ := strconv.Atoi(parseInfo(info)["leases_expired"]); n < 1 {
			return fmt.Errorf("INFO stats leases_expired = %q, want >= 1", parseInfo(info)["leases_expired"])
		}
		return nil
	})
}

// TestLeaseErrors: bad input gets a clear error naming what to fix.
func TestLeaseErrors(t *testing.T) {
	s := startServer(t, "--save", "")
	c := s.client(t, 2)
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"CC.ACQUIRE", "k", 2}, "ERR wrong number of arguments for 'cc.acquire' command"},
		{[]any{"CC.ACQUIRE", "k", 0, "1s"}, "ERR max 0 is out of range: must be 1..1099511627776"},
		{[]any{"CC.ACQUIRE", "k", 2, "1w"}, "ERR ttl \"1w\" is not a duration"},
		{[]any{"CC.ACQUIRE", "k", 2, "1s", "COST", 0}, "ERR cost 0 is out of range: must be 1..1099511627776"},
		{[]any{"CC.ACQUIRE", "k", 2, "1s", "ID", ""}, "ERR lease id must be 1 to 64 bytes"},
		{[]any{"CC.ACQUIRE", "k", 2, "1s", "ID", string(make([]byte, 65))}, "ERR lease id must be 1 to 64 bytes"},
		{[]any{"CC.ACQUIRE", "k", 2, "1s", "NOPE", 1}, "ERR syntax error"},
		{[]any{"CC.RELEASE", "k"}, "ERR wrong number of arguments for 'cc.release' command"},
		{[]any{"CC.RENEW", "k", "x", "0"}, "ERR ttl 0 is out of range: must be 1ms..3660d"},
	} {
		err := c.Do(ctxT(t), tc.args...).Err()
		if err == nil || len(err.Error()) < len(tc.want) || err.Error()[:len(tc.want)] != tc.want {
			t.Errorf("%v = %v, want an error starting %q", tc.args, err, tc.want)
		}
	}
}

// TestLeaseRules: limit-override replaces CC.ACQUIRE's max; under
// limit-shadow a refusal answers allowed and is counted, and its lease is
// not held.
func TestLeaseRules(t *testing.T) {
	s := startServer(t, "--save", "", "--limit-override", "ov:* 1 1 60", "--limit-shadow", "sh:*")
	c := s.client(t, 2)
	if r := ccAcquire(t, c, "ov:k", 5, "30s"); r.f[0] != 0 || r.f[1] != 1 || r.f[2] != 0 {
		t.Fatalf("CC.ACQUIRE ov:k 5 30s = %v, want allowed under the override's max 1", r)
	}
	if r := ccAcquire(t, c, "ov:k", 5, "30s"); r.f[0] != 1 {
		t.Fatalf("second CC.ACQUIRE ov:k = %v, want limited by the override", r)
	}
	before := shadowLimited(t, c)
	held := ccAcquire(t, c, "sh:k", 1, "30s")
	shadowed := ccAcquire(t, c, "sh:k", 1, "30s")
	if held.f[0] != 0 || shadowed.f[0] != 0 || shadowed.nilID {
		t.Fatalf("CC.ACQUIRE sh:k twice = %v, %v; want both answered allowed", held, shadowed)
	}
	if got := shadowLimited(t, c) - before; got != 1 {
		t.Fatalf("shadow refusals counted: %d, want 1", got)
	}
	if n := ccInt(t, c, "CC.RELEASE", "sh:k", shadowed.lease); n != 0 {
		t.Fatalf("CC.RELEASE of the shadowed lease = %d, want 0 (never held)", n)
	}
	if n := ccInt(t, c, "CC.RELEASE", "sh:k", held.lease); n != 1 {
		t.Fatalf("CC.RELEASE of the held lease = %d, want 1", n)
	}
}

// TestLeaseMigrate: MIGRATE moves a concurrency key with its leases (and
// DUMP/RESTORE carry them); a save and restart keeps them.
func TestLeaseMigrate(t *testing.T) {
	src, dst := startServer(t, "--save", ""), startServer(t)
	sc, dc := src.client(t, 2), dst.client(t, 2)
	a := ccAcquire(t, sc, "cc:mv", 2, "60s", "ID", "one")
	b := ccAcquire(t, sc, "cc:mv", 2, "60s")
	if a.f[0] != 0 || b.f[0] != 0 {
		t.Fatalf("CC.ACQUIRE on the source = %v, %v", a, b)
	}
	if err := sc.Do(ctxT(t), "MIGRATE", "127.0.0.1", dst.Port, "", 0, 5000, "KEYS", "cc:mv").Err(); err != nil {
		t.Fatalf("MIGRATE: %v", err)
	}
	if r := ccAcquire(t, dc, "cc:mv", 2, "60s"); r.f[0] != 1 || !r.nilID {
		t.Fatalf("CC.ACQUIRE on the target = %v, want limited: both leases moved", r)
	}
	dump, err := dc.Dump(ctxT(t), "cc:mv").Result()
	if err != nil {
		t.Fatalf("DUMP: %v", err)
	}
	if err := dc.RestoreReplace(ctxT(t), "cc:copy", 0, dump).Err(); err != nil {
		t.Fatalf("RESTORE: %v", err)
	}
	if n := ccInt(t, dc, "CC.RELEASE", "cc:copy", "one"); n != 1 {
		t.Fatalf("CC.RELEASE on the restored copy = %d, want 1", n)
	}
	// Kept through a snapshot: SAVE, kill -9, start again.
	if err := dc.Save(ctxT(t)).Err(); err != nil {
		t.Fatalf("SAVE: %v", err)
	}
	dst.kill()
	dst.restart()
	dc = dst.client(t, 2)
	if n := ccInt(t, dc, "CC.RELEASE", "cc:mv", b.lease); n != 1 {
		t.Fatalf("CC.RELEASE %s after a restart = %d, want 1 (the lease kept)", b.lease, n)
	}
	if n := ccInt(t, dc, "CC.RELEASE", "cc:mv", "one"); n != 1 {
		t.Fatalf("CC.RELEASE one after a restart = %d, want 1", n)
	}
}

// TestLeaseGroupFailover: in a 3-node group, kill -9 of the leader keeps
// every lease (one of them taken through a follower, which forwards it):
// after the failover the key is still full, and each lease releases on
// the new leader.
func TestLeaseGroupFailover(t *testing.T) {
	nodes := startCluster(t, 3)
	l := waitLeader(t, nodes)
	lc := noRetryClient(t, nodes[l].Addr)
	var leases []string
	for i := range 3 {
		r, err := ccAcquireErr(ctxT(t), lc, "cc:g", 3, "120s")
		if err != nil || r.f[0] != 0 {
			t.Fatalf("CC.ACQUIRE cc:g 3 120s #%d = %v, %v; want allowed", i+1, r, err)
		}
		leases = append(leases, r.lease)
	}
	// Through a follower (forwarded to the leader): the lease id comes
	// back, and it holds the fourth unit.
	fc := noRetryClient(t, nodes[(l+1)%3].Addr)
	r, err := ccAcquireErr(ctxT(t), fc, "cc:g", 4, "120s")
	if err != nil || r.f[0] != 0 || r.lease == "" {
		t.Fatalf("CC.ACQUIRE cc:g 4 120s through a follower = %v, %v; want allowed with a lease", r, err)
	}
	leases = append(leases, r.lease)
	nodes[l].kill()
	var others []*clusterNode
	for i, nd := range nodes {
		if i != l {
			others = append(others, nd)
		}
	}
	var after acquireReply
	poll.Until(t, 20*time.Second, func() error {
		nl := leaderOf(others)
		if nl < 0 {
			return fmt.Errorf("no new leader yet")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		after, err = ccAcquireErr(ctx, noRetryClient(t, others[nl].Addr), "cc:g", 4, "120s")
		return err
	})
	if after.f[0] != 1 || after.f[2] != 0 || !after.nilID {
		t.Fatalf("CC.ACQUIRE after the failover = %v, want limited: all four leases kept", after)
	}
	nc := noRetryClient(t, others[leaderOf(others)].Addr)
	for _, id := range leases {
		if n := ccInt(t, nc, "CC.RELEASE", "cc:g", id); n != 1 {
			t.Fatalf("CC.RELEASE %s on the new leader = %d, want 1", id, n)
		}
	}
}

// TestLeaseClusterOfGroups: in a cluster of two groups each concurrency
// key is decided by the group serving its slot (a cluster client follows
// MOVED): two of max 2 held, the third limited with no lease, a release
// answers 1 then 0 and frees one unit for the next acquire.
func TestLeaseClusterOfGroups(t *testing.T) {
	groups := startGroups(t, 2)
	cc := newClusterClient(t, groups, nil)
	ctx := ctxT(t)
	for _, g := range groups {
		key := keysIn(g, "cc", 1)[0]
		var ids []string
		for i := range 2 {
			r, err := cc.Do(ctx, "CC.ACQUIRE", key, 2, "30s").Slice()
			if err != nil || len(r) != 6 || r[0] != int64(0) {
				t.Fatalf("group %s: acquire %d = %v, %v; want allowed with a lease", g.name, i+1, r, err)
			}
			ids = append(ids, r[5].(string))
		}
		r, err := cc.Do(ctx, "CC.ACQUIRE", key, 2, "30s").Slice()
		if err != nil || len(r) != 6 || r[0] != int64(1) || r[5] != nil {
			t.Fatalf("group %s: third acquire = %v, %v; want limited, no lease", g.name, r, err)
		}
		if n, err := cc.Do(ctx, "CC.RELEASE", key, ids[0]).Int64(); err != nil || n != 1 {
			t.Fatalf("group %s: release = %d, %v; want 1", g.name, n, err)
		}
		if n, err := cc.Do(ctx, "CC.RELEASE", key, ids[0]).Int64(); err != nil || n != 0 {
			t.Errorf("group %s: second release = %d, %v; want 0", g.name, n, err)
		}
		if r, err := cc.Do(ctx, "CC.ACQUIRE", key, 2, "30s").Slice(); err != nil || len(r) != 6 || r[0] != int64(0) {
			t.Errorf("group %s: acquire after the release = %v, %v; want allowed", g.name, r, err)
		}
	}
}
