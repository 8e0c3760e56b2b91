package shards

import (
	"errors"
	"testing"
	"time"
	"unsafe"

	"github.com/cellserver/cellserver/engine"
)

func acquire(id string, max int64, ttl time.Duration) engine.Request {
	return engine.Request{Kind: engine.KindConcurrency, Op: engine.LeaseAcquire, Lease: id, Burst: max, Period: int64(ttl), Quantity: 1}
}

// TestLeases: a concurrency key in the keyspace: WRONGTYPE both ways, the
// leases counted (held, expired unreleased, bytes), the key gone when
// nothing is held, and a release or renew that keeps CL.INSPECT's
// parameters of the last acquire.
func TestLeases(t *testing.T) {
	s := newStore(t, 4)
	exec(t, s, limitOp("cc", acquire("a", 3, time.Second)), t0)
	exec(t, s, limitOp("cc", acquire("b", 3, 100*time.Millisecond)), t0)
	if st := s.Stats(t0); st.Leases != 2 || st.LeasesExpired != 0 {
		t.Fatalf("Stats after two acquires: %d leases, %d expired; want 2, 0", st.Leases, st.LeasesExpired)
	}
	if used, ok := s.KeyBytes([]byte("cc"), t0); !ok || used < 2*leaseBytes+2 {
		t.Fatalf("KeyBytes(cc) = %d, %v; want the leases counted", used, ok)
	}
	var res Result
	for _, op := range []*Op{limitOp("cc", gcra(1, 1, time.Second, 1)), limitOp("gc", gcra(1, 1, time.Second, 1))} {
		s.Exec(op, t0, &res)
		if op.Keys[0][0] == 'c' && !errors.Is(res.Err, ErrWrongType) {
			t.Fatalf("CL.THROTTLE on a concurrency key: %v, want ErrWrongType", res.Err)
		}
	}
	for _, op := range []engine.LeaseOp{engine.LeaseAcquire, engine.LeaseRelease, engine.LeaseRenew} {
		req := engine.Request{Kind: engine.KindConcurrency, Op: op, Lease: "x"}
		switch op {
		case engine.LeaseAcquire:
			req = acquire("x", 1, time.Second)
		case engine.LeaseRenew:
			req.Period = int64(time.Second)
		}
		s.Exec(limitOp("gc", req), t0, &res)
		if !errors.Is(res.Err, ErrWrongType) {
			t.Fatalf("op %d on a GCRA key: %v, want ErrWrongType", op, res.Err)
		}
	}
	// b expires unreleased; renew a, then release it: the key goes.
	renew := engine.Request{Kind: engine.KindConcurrency, Op: engine.LeaseRenew, Lease: "a", Period: int64(time.Second)}
	if r := exec(t, s, limitOp("cc", renew), t0+int64(200*time.Millisecond)); r[0].Limited {
		t.Fatal("renew of a held lease answered not held")
	}
	if st := s.Stats(t0); st.LeasesExpired != 1 || st.Leases != 1 {
		t.Fatalf("after b expired: %d leases, %d expired; want 1, 1", st.Leases, st.LeasesExpired)
	}
	_, p, known, ok := s.Inspect([]byte("cc"), t0+int64(200*time.Millisecond))
	if !ok || !known || p.Burst != 3 || p.Period != int64(100*time.Millisecond) {
		t.Fatalf("Inspect(cc) params = %+v, %v, %v; want the last acquire's (max 3, ttl 100ms)", p, known, ok)
	}
	rel := engine.Request{Kind: engine.KindConcurrency, Op: engine.LeaseRelease, Lease: "a"}
	exec(t, s, limitOp("cc", rel), t0+int64(300*time.Millisecond))
	if _, ok := s.Lookup([]byte("cc"), t0+int64(300*time.Millisecond)); ok {
		t.Fatal("the key outlived its last lease's release")
	}
	if st := s.Stats(t0); st.Leases != 0 || st.LeasesExpired != 1 {
		t.Fatalf("after the release: %d leases, %d expired; want 0, 1", st.Leases, st.LeasesExpired)
	}
	// A key whose every lease lapsed is reclaimed with them counted.
	exec(t, s, limitOp("cc2", acquire("z", 1, 50*time.Millisecond)), t0)
	s.Sweep(t0+int64(time.Second), 1<<20)
	if st := s.Stats(t0); st.LeasesExpired != 2 || st.Leases != 0 {
		t.Fatalf("after the sweep: %d leases, %d expired; want 0, 2", st.Leases, st.LeasesExpired)
	}
}

// leaseBytes is what an engine.Lease takes.
func TestLeaseBytes(t *testing.T) {
	if n := int64(unsafe.Sizeof(engine.Lease{})); n != leaseBytes {
		t.Fatalf("engine.Lease takes %d bytes, leaseBytes says %d", n, leaseBytes)
	}
}
