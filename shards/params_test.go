package shards

import (
	"fmt"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
)

// TestInspectParams: Inspect answers the parameters of the last request
// applied to a key (allowed or limited, by CL.THROTTLE or CL.THROTTLEALL),
// unknown for a restored key, and nothing for a missing one; it changes no
// state.
func TestInspectParams(t *testing.T) {
	g1 := gcra(5, 10, time.Second, 1)
	g2 := gcra(1, 2, time.Minute, 1)
	tests := []struct {
		name      string
		ops       []*Op
		key       string
		want      Params
		wantKnown bool
		wantOK    bool
	}{
		{"missing", nil, "k", Params{}, false, false},
		{"one throttle", []*Op{limitOp("k", g1)}, "k", ParamsOf(&g1), true, true},
		{"last params win", []*Op{limitOp("k", g1), limitOp("k", g2)}, "k", ParamsOf(&g2), true, true},
		{"limited still records", []*Op{limitOp("k", gcra(0, 1, time.Hour, 1)), limitOp("k", g2)}, "k", ParamsOf(&g2), true, true},
		{"throttleall", []*Op{limitAllOp([]string{"a", "k"}, g1, g2)}, "k", ParamsOf(&g2), true, true},
		{"restore forgets", []*Op{limitOp("k", g1), {Code: OpRestore, Keys: [][]byte{[]byte("k")}, Replace: true, State: gcraState(t0 + int64(time.Hour))}}, "k", Params{}, false, true},
		{"window kind", []*Op{limitOp("k", fw(3, time.Minute, 1))}, "k", Params{Burst: 3, Period: int64(time.Minute)}, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, 1)
			for _, op := range tc.ops {
				var res Result
				s.Exec(op, t0, &res)
				if res.Err != nil {
					t.Fatalf("Exec = %v", res.Err)
				}
			}
			before, _ := s.Lookup([]byte(tc.key), t0)
			st, p, known, ok := s.Inspect([]byte(tc.key), t0)
			if ok != tc.wantOK || known != tc.wantKnown || p != tc.want {
				t.Fatalf("Inspect = %+v known %v ok %v, want %+v known %v ok %v", p, known, ok, tc.want, tc.wantKnown, tc.wantOK)
			}
			if after, _ := s.Lookup([]byte(tc.key), t0); !sameState(&after, &before) || (ok && !sameState(&st, &before)) {
				t.Errorf("state %+v → %+v (Inspect answered %+v), want unchanged", before, after, st)
			}
		})
	}
}

// TestParamSetsBounded: a shard remembers at most maxParamSets distinct
// sets; a set is freed when its last key goes, and then reused; a rebuild
// keeps every key's parameters.
func TestParamSetsBounded(t *testing.T) {
	s := newStore(t, 1)
	sh := &s.shards[0]
	key := func(i int) string { return fmt.Sprintf("k%d", i) }
	req := func(i int) engine.Request { return gcra(int64(i), 1, time.Hour, 1) }
	for i := range maxParamSets + 10 {
		exec(t, s, limitOp(key(i), req(i)), t0)
	}
	for _, i := range []int{0, maxParamSets - 1, maxParamSets, maxParamSets + 9} {
		_, p, known, _ := s.Inspect([]byte(key(i)), t0)
		want := ParamsOf(new(req(i)))
		if wantKnown := i < maxParamSets; known != wantKnown || (known && p != want) {
			t.Errorf("key %d: params %+v known %v, want %+v known %v", i, p, known, want, wantKnown)
		}
	}
	// Deleting the first 100 keys frees their sets for new ones.
	for i := range 100 {
		exec(t, s, &Op{Code: OpDel, Keys: [][]byte{[]byte(key(i))}}, t0)
	}
	if got := len(sh.params.index); got != maxParamSets-100 {
		t.Fatalf("sets after deleting 100 keys = %d, want %d", got, maxParamSets-100)
	}
	exec(t, s, limitOp(key(maxParamSets), req(maxParamSets)), t0)
	if _, p, known, _ := s.Inspect([]byte(key(maxParamSets)), t0); !known || p != ParamsOf(new(req(maxParamSets))) {
		t.Errorf("after a slot was freed: params %+v known %v, want known", p, known)
	}
	// Force a rebuild: delete most keys; the survivors keep theirs.
	for i := 100; i < maxParamSets-5; i++ {
		exec(t, s, &Op{Code: OpDel, Keys: [][]byte{[]byte(key(i))}}, t0)
	}
	sh.mu.Lock()
	sh.rebuild()
	sh.mu.Unlock()
	for i := maxParamSets - 5; i < maxParamSets; i++ {
		if _, p, known, _ := s.Inspect([]byte(key(i)), t0); !known || p != ParamsOf(new(req(i))) {
			t.Errorf("key %d after rebuild: params %+v known %v", i, p, known)
		}
	}
	// Every reference count matches the keys holding it.
	sh.mu.Lock()
	defer sh.mu.Unlock()
	held := map[uint8]uint32{}
	for i := range sh.recs {
		if sh.recs[i].live() && sh.pidx[i] != 0 {
			held[sh.pidx[i]]++
		}
	}
	for r := range sh.params.refs {
		if got, want := sh.params.refs[r], held[uint8(r+1)]; got != want {
			t.Errorf("refs[%d] = %d, want %d keys holding it", r+1, got, want)
		}
	}
}
