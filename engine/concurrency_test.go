package engine

import (
	"errors"
	"testing"
)

// ccStep is one concurrency request of a scenario and what it must answer.
type ccStep struct {
	at      int64 // ms after t0
	op      LeaseOp
	id      string
	max     int64
	ttl     int64 // ms
	cost    int64
	limited bool
	remain  int64
	retry   int64 // ns; checked when limited
	lease   string
}

func TestConcurrency(t *testing.T) {
	tests := []struct {
		name  string
		steps []ccStep
	}{
		{"two of max 2 held, third limited until the earliest expiry", []ccStep{
			{at: 0, op: LeaseAcquire, id: "a", max: 2, ttl: 1000, cost: 1, remain: 1, lease: "a"},
			{at: 10, op: LeaseAcquire, id: "b", max: 2, ttl: 1000, cost: 1, remain: 0, lease: "b"},
			{at: 20, op: LeaseAcquire, id: "c", max: 2, ttl: 1000, cost: 1, limited: true, retry: 980 * ms},
			{at: 30, op: LeaseRelease, id: "a"},
			{at: 31, op: LeaseRelease, id: "a", limited: true},
			{at: 40, op: LeaseAcquire, id: "c", max: 2, ttl: 1000, cost: 1, remain: 0, lease: "c"},
		}},
		{"an id acquired twice holds one lease", []ccStep{
			{at: 0, op: LeaseAcquire, id: "x", max: 3, ttl: 100, cost: 2, remain: 1, lease: "x"},
			{at: 50, op: LeaseAcquire, id: "x", max: 3, ttl: 100, cost: 2, remain: 1, lease: "x"},
			{at: 120, op: LeaseAcquire, id: "y", max: 3, ttl: 100, cost: 1, remain: 0, lease: "y"}, // x renewed at 50: held until 150
			{at: 150, op: LeaseAcquire, id: "z", max: 3, ttl: 100, cost: 2, remain: 0, lease: "z"},
		}},
		{"a lease frees itself at its ttl unless renewed", []ccStep{
			{at: 0, op: LeaseAcquire, id: "r", max: 1, ttl: 300, cost: 1, remain: 0, lease: "r"},
			{at: 200, op: LeaseRenew, id: "r", ttl: 300},
			{at: 400, op: LeaseAcquire, id: "s", max: 1, ttl: 300, cost: 1, limited: true, retry: 100 * ms},
			{at: 500, op: LeaseAcquire, id: "s", max: 1, ttl: 300, cost: 1, remain: 0, lease: "s"},
			{at: 800, op: LeaseRenew, id: "s", ttl: 300, limited: true},
		}},
		{"cost above max is never allowed", []ccStep{
			{at: 0, op: LeaseAcquire, max: 2, ttl: 100, cost: 3, limited: true, remain: 2, retry: -1},
		}},
		{"generated ids are unique and deterministic", []ccStep{
			{at: 0, op: LeaseAcquire, max: 5, ttl: 100, cost: 1, remain: 4, lease: leaseID(t0, 1)},
			{at: 0, op: LeaseAcquire, max: 5, ttl: 100, cost: 1, remain: 3, lease: leaseID(t0, 2)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var st State
			for i, s := range tt.steps {
				now := t0 + s.at*ms
				req := Request{Kind: KindConcurrency, Op: s.op, Lease: s.id, Burst: s.max, Period: s.ttl * ms, Quantity: s.cost}
				if err := req.Validate(); err != nil {
					t.Fatalf("step %d: Validate(%+v) = %v", i, req, err)
				}
				var r Result
				st, r = Apply(st, &req, now)
				if r.Limited != s.limited {
					t.Fatalf("step %d: limited = %v, want %v (%+v)", i, r.Limited, s.limited, r)
				}
				if s.op != LeaseAcquire {
					continue
				}
				if r.Remaining != s.remain || (!s.limited && r.Lease != s.lease) {
					t.Fatalf("step %d: remaining, lease = %d, %q, want %d, %q", i, r.Remaining, r.Lease, s.remain, s.lease)
				}
				if s.limited && r.RetryAfter != s.retry {
					t.Fatalf("step %d: retry_after = %d, want %d", i, r.RetryAfter, s.retry)
				}
				if !s.limited && (r.RetryAfter != -1 || r.ResetAfter <= 0) {
					t.Fatalf("step %d: retry_after, reset_after = %d, %d, want -1, > 0", i, r.RetryAfter, r.ResetAfter)
				}
				if live(st, now) && st.A > s.max {
					t.Fatalf("step %d: %d units held, max %d", i, st.A, s.max)
				}
			}
		})
	}
}

func TestConcurrencyReleaseDeletesKey(t *testing.T) {
	req := Request{Kind: KindConcurrency, Op: LeaseAcquire, Burst: 1, Period: sec, Quantity: 1}
	st, r := Apply(State{}, &req, t0)
	if r.Limited || !live(st, t0) {
		t.Fatalf("acquire = %+v, %+v", st, r)
	}
	rel := Request{Kind: KindConcurrency, Op: LeaseRelease, Lease: r.Lease}
	st, r = Apply(st, &rel, t0+1)
	if r.Limited || live(st, t0+1) {
		t.Fatalf("release = %+v, %+v; want allowed and the key gone", st, r)
	}
}

func TestConcurrencyExpiredCounted(t *testing.T) {
	st := State{}
	for _, id := range []string{"a", "b"} {
		req := Request{Kind: KindConcurrency, Op: LeaseAcquire, Lease: id, Burst: 3, Period: 100 * ms, Quantity: 1}
		st, _ = Apply(st, &req, t0)
	}
	req := Request{Kind: KindConcurrency, Op: LeaseAcquire, Lease: "c", Burst: 3, Period: sec, Quantity: 1}
	// a is renewed at +50 ms; b expires unreleased at +100 ms.
	renew := Request{Kind: KindConcurrency, Op: LeaseRenew, Lease: "a", Period: 100 * ms}
	st, _ = Apply(st, &renew, t0+50*ms)
	st, r := Apply(st, &req, t0+120*ms)
	if r.ExpiredLeases != 1 || len(st.Leases) != 2 || st.A != 2 {
		t.Fatalf("after b expired: %+v, %+v; want 1 expired, a and c held", st, r)
	}
}

func TestParseLease(t *testing.T) {
	tests := []struct {
		op   LeaseOp
		args []string
		want Request
		err  error
	}{
		{LeaseAcquire, []string{"2", "30s"}, Request{Kind: KindConcurrency, Op: LeaseAcquire, Burst: 2, Period: 30 * sec, Quantity: 1}, nil},
		{LeaseAcquire, []string{"5", "300ms", "cost", "2", "ID", "job-7"}, Request{Kind: KindConcurrency, Op: LeaseAcquire, Burst: 5, Period: 300 * ms, Quantity: 2, Lease: "job-7"}, nil},
		{LeaseAcquire, []string{"5", "1s", "ID", "a", "ID", "b"}, Request{}, ErrSyntax},
		{LeaseAcquire, []string{"5", "1s", "COST"}, Request{}, ErrSyntax},
		{LeaseAcquire, []string{"5", "1s", "WAIT", "1s"}, Request{Kind: KindConcurrency, Op: LeaseAcquire, Burst: 5, Period: sec, Quantity: 1, Wait: sec}, nil},
		{LeaseAcquire, []string{"5", "1s", "WAIT", "1s", "ID", "a"}, Request{}, ErrSyntax},
		{LeaseAcquire, []string{"0", "1s"}, Request{}, ErrZero},
		{LeaseAcquire, []string{"2", "0"}, Request{}, ErrZero},
		{LeaseAcquire, []string{"2", "1s", "COST", "0"}, Request{}, ErrZero},
		{LeaseAcquire, []string{"2", "1s", "ID", string(make([]byte, 65))}, Request{}, ErrLeaseID},
		{LeaseAcquire, []string{"2"}, Request{}, ErrArity},
		{LeaseRelease, []string{"a"}, Request{Kind: KindConcurrency, Op: LeaseRelease, Lease: "a"}, nil},
		{LeaseRelease, []string{""}, Request{}, ErrLeaseID},
		{LeaseRelease, []string{"a", "b"}, Request{}, ErrArity},
		{LeaseRenew, []string{"a", "10s"}, Request{Kind: KindConcurrency, Op: LeaseRenew, Lease: "a", Period: 10 * sec}, nil},
		{LeaseRenew, []string{"a", "-1s"}, Request{}, ErrNegative},
	}
	for _, tt := range tests {
		got, err := ParseLease(tt.op, args(tt.args...))
		if !errors.Is(err, tt.err) || got != tt.want {
			t.Errorf("ParseLease(%d, %q) = %+v, %v, want %+v, %v", tt.op, tt.args, got, err, tt.want, tt.err)
		}
	}
}
