package region

import (
	"testing"

	"github.com/cellserver/cellserver/engine"
)

// TestForcedConsumes: for every algorithm, a peer's consumption applied
// with forced goes through whatever the key holds, and the key then refuses
// an ordinary request until that consumption has refilled or left the
// window; refunds stay refunds.
func TestForcedConsumes(t *testing.T) {
	const s = int64(1e9)
	now := int64(1_700_000_000) * s
	tests := []struct {
		name string
		req  engine.Request // the key's ordinary request, quantity 1
	}{
		{"gcra", engine.Request{Kind: engine.KindGCRA, Burst: 4, Rate: 1, Period: s, Quantity: 1}},
		{"gcra slow", engine.Request{Kind: engine.KindGCRA, Burst: 0, Rate: 1, Period: engine.MaxPeriod, Quantity: 1}},
		{"token bucket", engine.Request{Kind: engine.KindTokenBucket, Burst: 5, Rate: 1, Period: s, Quantity: 1}},
		{"token bucket interval", engine.Request{Kind: engine.KindTokenBucket, Burst: 5, Rate: 1, Period: s, Quantity: 1, Interval: true}},
		{"leaky bucket", engine.Request{Kind: engine.KindLeakyBucket, Burst: 5, Rate: 1, Period: s, Quantity: 1}},
		{"fixed window", engine.Request{Kind: engine.KindFixedWindow, Burst: 5, Period: 60 * s, Quantity: 1}},
		{"sliding window", engine.Request{Kind: engine.KindSlidingWindow, Burst: 5, Period: 60 * s, Quantity: 1}},
		{"sliding log", engine.Request{Kind: engine.KindSlidingLog, Burst: 5, Period: 60 * s, Quantity: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Fill the key to its limit the ordinary way.
			var st engine.State
			for i := 0; ; i++ {
				next, r := engine.Apply(st, &tt.req, now)
				if r.Limited {
					break
				}
				st = next
				if i > 100 {
					t.Fatal("never limited")
				}
			}
			// A peer consumed 3 more: forced, it goes through.
			peer := tt.req
			peer.Quantity = 3
			f := forced(peer, engine.DefaultMaxLogLimit)
			if err := f.Validate(); err != nil {
				t.Fatalf("forced(%+v) = %+v: %v", peer, f, err)
			}
			if f.Quantity != 3 || f.Period != peer.Period || f.Rate != peer.Rate || f.Kind != peer.Kind {
				t.Fatalf("forced changed more than the limit: %+v", f)
			}
			next, r := engine.Apply(st, &f, now)
			if r.Limited {
				t.Fatalf("forced consumption refused: %+v", r)
			}
			if sameState(next, st) {
				t.Fatal("forced consumption changed nothing")
			}
			// Ordinary requests stay refused a while longer than they would
			// have without it (the consumption counts).
			_, r0 := engine.Apply(st, &tt.req, now)
			_, r1 := engine.Apply(next, &tt.req, now)
			if !r1.Limited {
				t.Errorf("after forced consumption, an ordinary request is allowed: %+v", r1)
			}
			if tt.req.Kind != engine.KindFixedWindow && tt.req.Kind != engine.KindSlidingWindow && tt.req.Kind != engine.KindSlidingLog &&
				!tt.req.Interval && r1.RetryAfter <= r0.RetryAfter {
				t.Errorf("retry_after %d after forced consumption, want more than %d", r1.RetryAfter, r0.RetryAfter)
			}
		})
	}
	// A GCRA refund, forced, gives back.
	g := engine.Request{Kind: engine.KindGCRA, Burst: 4, Rate: 1, Period: s, Quantity: 5}
	st, _ := engine.Apply(engine.State{}, &g, now)
	g.Quantity = -2
	next, r := engine.Apply(st, ptr(forced(g, 0)), now)
	if r.Limited || next.A >= st.A {
		t.Errorf("forced refund: %+v, TAT %d → %d; want given back", r, st.A, next.A)
	}
}

func ptr[T any](v T) *T { return &v }

func sameState(a, b engine.State) bool {
	return a.Kind == b.Kind && a.ExpireAt == b.ExpireAt && a.A == b.A && a.B == b.B && a.C == b.C && len(a.Log) == len(b.Log)
}
