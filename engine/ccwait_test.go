package engine

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// ccwStep is one request of a waiting-line scenario: what it sends and what
// it must answer, and which waiters the op must grant.
type ccwStep struct {
	at      int64 // ms after t0
	op      LeaseOp
	id      string
	cost    int64
	wait    int64 // ms
	limited bool
	queued  bool
	remain  int64 // checked for acquires
	granted []string
}

func TestConcurrencyWait(t *testing.T) {
	const max, ttl = 2, 1000 // ms
	tests := []struct {
		name  string
		steps []ccwStep
	}{
		{"each release admits exactly the next waiter, in arrival order", []ccwStep{
			{at: 0, op: LeaseAcquire, id: "a", remain: 1},
			{at: 1, op: LeaseAcquire, id: "b", remain: 0},
			{at: 2, op: LeaseAcquire, id: "c", wait: 5000, limited: true, queued: true},
			{at: 3, op: LeaseAcquire, id: "d", wait: 5000, limited: true, queued: true},
			{at: 4, op: LeaseAcquire, id: "e", wait: 5000, limited: true, queued: true},
			{at: 10, op: LeaseRelease, id: "b", granted: []string{"c"}},
			{at: 11, op: LeaseAcquire, id: "new", limited: true}, // never overtakes d and e
			{at: 12, op: LeaseRelease, id: "a", granted: []string{"d"}},
			{at: 13, op: LeaseRelease, id: "c", granted: []string{"e"}},
			{at: 14, op: LeaseRelease, id: "d"},
			{at: 15, op: LeaseAcquire, id: "new", remain: 0},
		}},
		{"a newcomer that fits never overtakes a larger waiter", []ccwStep{
			{at: 0, op: LeaseAcquire, id: "a", remain: 1},
			{at: 1, op: LeaseAcquire, id: "big", cost: 2, wait: 5000, limited: true, queued: true},
			{at: 2, op: LeaseAcquire, id: "small", limited: true},
			{at: 3, op: LeaseAcquire, id: "small2", wait: 5000, limited: true, queued: true},
			{at: 4, op: LeaseRelease, id: "a", granted: []string{"big"}},
			{at: 5, op: LeaseRelease, id: "big", granted: []string{"small2"}},
		}},
		{"a waiter leaves at its deadline, not granted", []ccwStep{
			{at: 0, op: LeaseAcquire, id: "a", remain: 1},
			{at: 0, op: LeaseAcquire, id: "b", remain: 0},
			{at: 10, op: LeaseAcquire, id: "w1", wait: 100, limited: true, queued: true},
			{at: 20, op: LeaseAcquire, id: "w2", wait: 5000, limited: true, queued: true},
			{at: 200, op: LeaseRelease, id: "a", granted: []string{"w2"}},
			{at: 201, op: LeaseRelease, id: "w1", limited: true},
		}},
		{"an id already waiting keeps its one place", []ccwStep{
			{at: 0, op: LeaseAcquire, id: "a", cost: 2, remain: 0},
			{at: 1, op: LeaseAcquire, id: "w", wait: 1000, limited: true, queued: true},
			{at: 2, op: LeaseAcquire, id: "x", wait: 1000, limited: true, queued: true},
			{at: 3, op: LeaseAcquire, id: "w", wait: 1000, limited: true, queued: true},
			{at: 4, op: LeaseRelease, id: "a", granted: []string{"w", "x"}},
		}},
		{"a release of a waiting id takes it out of line", []ccwStep{
			{at: 0, op: LeaseAcquire, id: "a", cost: 2, remain: 0},
			{at: 1, op: LeaseAcquire, id: "w", wait: 1000, limited: true, queued: true},
			{at: 2, op: LeaseAcquire, id: "x", wait: 1000, limited: true, queued: true},
			{at: 3, op: LeaseRelease, id: "w"},
			{at: 4, op: LeaseRelease, id: "w", limited: true},
			{at: 5, op: LeaseRenew, id: "x", limited: true}, // a waiter holds no lease to renew
			{at: 6, op: LeaseRelease, id: "a", granted: []string{"x"}},
		}},
		{"an expired lease admits the next waiter at the next op", []ccwStep{
			{at: 0, op: LeaseAcquire, id: "a", cost: 2, remain: 0},
			{at: 10, op: LeaseAcquire, id: "w", wait: 5000, limited: true, queued: true},
			{at: 999, op: LeaseAcquire, id: "w", wait: 4011, limited: true, queued: true},
			{at: 1000, op: LeaseAcquire, id: "w", wait: 4010, remain: 1, granted: []string{"w"}},
		}},
		{"an acquire without WAIT of a waiting id leaves the line, limited", []ccwStep{
			{at: 0, op: LeaseAcquire, id: "a", cost: 2, remain: 0},
			{at: 1, op: LeaseAcquire, id: "w", wait: 1000, limited: true, queued: true},
			{at: 2, op: LeaseAcquire, id: "w", limited: true},
			{at: 3, op: LeaseRelease, id: "a"},
			{at: 4, op: LeaseRelease, id: "w", limited: true},
		}},
		{"remaining counts the waiting units", []ccwStep{
			{at: 0, op: LeaseAcquire, id: "a", remain: 1},
			{at: 1, op: LeaseAcquire, id: "w", cost: 2, wait: 1000, limited: true, queued: true, remain: 0},
			{at: 2, op: LeaseRelease, id: "a", granted: []string{"w"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var st State
			for i, s := range tt.steps {
				now := t0 + s.at*ms
				cost := s.cost
				if cost == 0 && s.op == LeaseAcquire {
					cost = 1
				}
				req := Request{Kind: KindConcurrency, Op: s.op, Lease: s.id, Quantity: cost, Wait: s.wait * ms}
				switch s.op {
				case LeaseAcquire:
					req.Burst, req.Period = max, ttl*ms
				case LeaseRenew:
					req.Period = ttl * ms
				}
				if err := req.Validate(); err != nil {
					t.Fatalf("step %d: Validate(%+v) = %v", i, req, err)
				}
				before := st
				var r Result
				st, r = Apply(st, &req, now)
				if r.Limited != s.limited || r.Queued != s.queued {
					t.Fatalf("step %d: limited, queued = %v, %v, want %v, %v (%+v)", i, r.Limited, r.Queued, s.limited, s.queued, r)
				}
				if s.op == LeaseAcquire && r.Remaining != s.remain {
					t.Fatalf("step %d: remaining = %d, want %d", i, r.Remaining, s.remain)
				}
				var got []string
				for _, g := range Granted(&before, &st, now, nil) {
					if g.Limited || g.RetryAfter != -1 || g.Limit != max || g.ResetAfter <= 0 {
						t.Fatalf("step %d: granted reply %+v is not an allowed one", i, g)
					}
					got = append(got, g.Lease)
				}
				if !slices.Equal(got, s.granted) {
					t.Fatalf("step %d: granted %q, want %q", i, got, s.granted)
				}
				checkLeaseState(t, i, &st, now)
			}
		})
	}
}

// checkLeaseState checks a concurrency state's invariants with max 2 (the
// scenarios' keys): checkLeaseStateMax.
func checkLeaseState(t *testing.T, step int, st *State, _ int64) {
	t.Helper()
	checkLeaseStateMax(t, 0, step, st, 2)
}

func TestConcurrencyWaitParse(t *testing.T) {
	r, err := ParseLease(LeaseAcquire, args("2", "30s", "ID", "x", "WAIT", "250ms"))
	if err != nil || r.Wait != 250*ms || r.Lease != "x" {
		t.Fatalf("ParseLease = %+v, %v", r, err)
	}
	for _, a := range [][][]byte{
		args("2", "30s", "WAIT", "1s", "ID", "x"), // WAIT comes last
		args("2", "30s", "WAIT", "1s", "WAIT", "1s"),
	} {
		if _, err := ParseLease(LeaseAcquire, a); err == nil {
			t.Fatalf("ParseLease(%q) accepted", a)
		}
	}
	if _, err := ParseLease(LeaseAcquire, args("2", "30s", "WAIT", "2d")); err == nil {
		t.Fatal("a WAIT above a day accepted")
	}
	rel := Request{Kind: KindConcurrency, Op: LeaseRelease, Lease: "x", Wait: sec}
	if rel.Validate() == nil {
		t.Fatal("a release with a wait validated")
	}
}

// A shadowed acquire never waits.
func TestConcurrencyWaitShadow(t *testing.T) {
	st, _ := Apply(State{}, &Request{Kind: KindConcurrency, Op: LeaseAcquire, Burst: 1, Period: sec, Quantity: 1}, t0)
	req := Request{Kind: KindConcurrency, Op: LeaseAcquire, Burst: 1, Period: sec, Quantity: 1, Wait: sec, Shadow: true}
	next, r := Apply(st, &req, t0)
	if !r.Limited || r.Queued || next.C != 0 {
		t.Fatalf("shadowed acquire: %+v, waiters %d", r, next.C)
	}
}

// Random ops on one key of max 3 keep the line's rules: never more than
// max units held; an acquire allowed at once only while nobody waits;
// grants in arrival order (a granted waiter never has an earlier waiter
// still in line, beyond those that cannot fit); and the state's counts.
func TestConcurrencyWaitRandom(t *testing.T) {
	const max = 3
	for seed := int64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		var st State
		now := t0
		ids := []string{"a", "b", "c", "d", "e", "f", "g"}
		for step := range 300 {
			now += int64(rng.IntN(300)) * ms
			id := ids[rng.IntN(len(ids))]
			var req Request
			switch rng.IntN(3) {
			case 0, 1:
				req = Request{Kind: KindConcurrency, Op: LeaseAcquire, Lease: id, Burst: max, Period: int64(1+rng.IntN(2000)) * ms, Quantity: int64(1 + rng.IntN(2))}
				if rng.IntN(2) == 0 {
					req.Wait = int64(1+rng.IntN(3000)) * ms
				}
			default:
				req = Request{Kind: KindConcurrency, Op: LeaseRelease, Lease: id}
			}
			if err := req.Validate(); err != nil {
				t.Fatal(err)
			}
			before := st
			var beforeWaiters []string
			if before.ExpireAt > now {
				for _, l := range before.Leases {
					if l.Waiting() && l.ExpireAt > now {
						beforeWaiters = append(beforeWaiters, l.ID)
					}
				}
			}
			next, r := Apply(st, &req, now)
			checkLeaseStateMax(t, seed, step, &next, max)
			granted := Granted(&before, &next, now, nil)
			// Grants come from the head: the granted are a prefix of
			// the live waiters of before, minus those that left.
			pos := 0
			for _, g := range granted {
				i := slices.Index(beforeWaiters[pos:], g.Lease)
				if i < 0 {
					t.Fatalf("seed %d step %d: granted %q, not a waiter after the ones granted before it (%q)", seed, step, g.Lease, beforeWaiters)
				}
				pos += i + 1
			}
			if req.Op == LeaseAcquire && !r.Limited && r.Lease == id {
				held := false
				for _, l := range before.Leases {
					if l.ID == id && !l.Waiting() && l.ExpireAt > now {
						held = true
					}
				}
				wasWaiting := slices.Contains(beforeWaiters, id)
				if !held && !wasWaiting && len(beforeWaiters) > len(granted) {
					t.Fatalf("seed %d step %d: %q allowed at once while %d waited", seed, step, id, len(beforeWaiters)-len(granted))
				}
			}
			st = next
		}
	}
}

// checkLeaseStateMax checks a concurrency state's counts and its bound.
func checkLeaseStateMax(t *testing.T, seed int64, step int, st *State, max int64) {
	t.Helper()
	if st.Kind == KindNone {
		return
	}
	held, _, _ := tally(st.Leases)
	var waiters, latest int64
	for _, l := range st.Leases {
		if l.Waiting() {
			waiters++
		}
		latest = max64(latest, l.ExpireAt)
	}
	if st.A != held || st.C != waiters || st.ExpireAt != latest || held > max {
		t.Fatalf("seed %d step %d: state A=%d C=%d ExpireAt=%d; leases hold %d (max %d), %d waiters, latest %d", seed, step, st.A, st.C, st.ExpireAt, held, max, waiters, latest)
	}
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
