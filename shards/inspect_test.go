package shards

import (
	"testing"

	"github.com/cellserver/cellserver/engine"
)

// TestDescribe: a concurrency key reports its live leases only and the
// units they leave; a known key peeks (nothing changes); parameters that
// are unknown or cannot peek leave the parameter fields unknown while the
// time to expiry is always reported.
func TestDescribe(t *testing.T) {
	const now = int64(1e12)
	leases := []engine.Lease{{ID: "a", Units: 2, ExpireAt: now + 5e9}, {ID: "b", Units: 3, ExpireAt: now - 1}}
	cc := engine.State{Kind: engine.KindConcurrency, ExpireAt: now + 5e9, Leases: leases}
	take := Params{Burst: 5, Period: 60e9}.Request(engine.KindFixedWindow, 2)
	fw, _ := engine.Apply(engine.State{}, &take, now)
	tests := []struct {
		name                  string
		st                    engine.State
		p                     Params
		known                 bool
		wantKnown             bool
		wantLimit, wantRemain int64
		wantLeases            int
	}{
		{"concurrency", cc, Params{Burst: 4, Period: 5e9}, true, true, 4, 2, 1},
		{"concurrency unknown", cc, Params{}, false, false, 0, 0, 1},
		{"fixed window peek", fw, Params{Burst: 5, Period: 60e9}, true, true, 5, 3, 0},
		{"unknown", fw, Params{}, false, false, 0, 0, 0},
		{"cannot peek", fw, Params{Burst: 5}, true, false, 0, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := Describe(tc.st, tc.p, tc.known, now)
			if in.Known != tc.wantKnown || in.TTL != engine.CeilMillis(tc.st.ExpireAt-now) || len(in.Leases) != tc.wantLeases {
				t.Fatalf("Describe = %+v, want known %v, ttl %d ms, %d leases", in, tc.wantKnown, engine.CeilMillis(tc.st.ExpireAt-now), tc.wantLeases)
			}
			f := in.Fields()
			if in.Known && (f[4].Value != tc.wantLimit || f[5].Value != tc.wantRemain) {
				t.Errorf("limit, remaining = %d, %d, want %d, %d", f[4].Value, f[5].Value, tc.wantLimit, tc.wantRemain)
			}
			for _, x := range f {
				if wantUnknown := !tc.wantKnown && x.Name != "reset_ms" && x.Name != "ttl_ms"; x.Unknown != wantUnknown {
					t.Errorf("field %s unknown = %v, want %v", x.Name, x.Unknown, wantUnknown)
				}
			}
		})
	}
	if &leases[0] == &Describe(cc, Params{}, false, now).Leases[0] {
		t.Error("Describe returned the store's lease array, want a copy")
	}
}
