package snapshot

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/shards"
)

// waiterState is a concurrency key with two held leases and two waiters in
// line (CC.ACQUIRE … WAIT), as the engine makes it.
func waiterState(t *testing.T) engine.State {
	t.Helper()
	var st engine.State
	for i, id := range []string{"a", "b", "w1", "w2"} {
		req := engine.Request{Kind: engine.KindConcurrency, Op: engine.LeaseAcquire, Burst: 2, Period: 30 * sec, Quantity: 1, Lease: id}
		if i >= 2 {
			req.Wait = 5 * sec
		}
		var r engine.Result
		st, r = engine.Apply(st, &req, t0+int64(i))
		if (i >= 2) != r.Queued {
			t.Fatalf("acquire %s: %+v", id, r)
		}
	}
	if st.C != 2 || len(st.Leases) != 4 {
		t.Fatalf("state %+v: want 2 leases and 2 waiters", st)
	}
	return st
}

// The waiters of a concurrency key survive a snapshot and a DUMP payload:
// their ids, units, deadlines, max and ttl, in line order.
func TestWaitersRoundTrip(t *testing.T) {
	st := waiterState(t)
	es := []shards.Entry{{Key: []byte("cc:wait"), State: st}}
	b := encodeSnapshot(t, Header{Created: t0, Shards: 1}, es)
	_, got, err := readAll(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("readAll: %v", err)
	}
	sameEntries(t, got, es)
	if !reflect.DeepEqual(got[0].State.Leases, st.Leases) {
		t.Fatalf("leases %+v, want %+v", got[0].State.Leases, st.Leases)
	}
	d, err := DecodeDump(EncodeDump(&st))
	if err != nil || !reflect.DeepEqual(d, st) {
		t.Fatalf("DUMP round trip = %+v, %v, want %+v", d, err, st)
	}
	// Released in turn after the load, the line grants w1 then w2.
	next := got[0].State
	for _, id := range []string{"a", "b"} {
		before := next
		next, _ = engine.Apply(next, &engine.Request{Kind: engine.KindConcurrency, Op: engine.LeaseRelease, Lease: id}, t0+sec)
		g := engine.Granted(&before, &next, t0+sec, nil)
		if want := map[string]string{"a": "w1", "b": "w2"}[id]; len(g) != 1 || g[0].Lease != want {
			t.Fatalf("release %s granted %+v, want %s", id, g, want)
		}
	}
}

func TestWaitersInvalid(t *testing.T) {
	good := waiterState(t)
	tests := []struct {
		name string
		edit func(st *engine.State)
	}{
		{"C not the waiters", func(st *engine.State) { st.C = 1 }},
		{"waiter max below its units", func(st *engine.State) { st.Leases[2].Max = 0 }},
		{"waiter ttl beyond MaxPeriod", func(st *engine.State) { st.Leases[3].TTL = engine.MaxPeriod + 1 }},
		{"held lease with a max", func(st *engine.State) { st.Leases[0].Max = 2 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := good
			st.Leases = append([]engine.Lease(nil), good.Leases...)
			tt.edit(&st)
			if err := ValidateState(&st); !errors.Is(err, ErrInvalidState) {
				t.Fatalf("ValidateState = %v, want ErrInvalidState", err)
			}
		})
	}
}
