package resp

import (
	"strings"
	"testing"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/shards"
)

// CL.THROTTLEALL's keys are the first of each group of five, never the
// trailing WAIT (a cluster would otherwise route the call by "WAIT", and
// refuse it as CROSSSLOT).
func TestThrottleAllKeys(t *testing.T) {
	cases := []struct{ call, keys string }{
		{"CL.THROTTLEALL a 0 1 1 1", "a"},
		{"CL.THROTTLEALL a 0 1 1 1 b 0 1 1 1", "a b"},
		{"CL.THROTTLEALL a 0 1 1 1 WAIT 2", "a"},
		{"CL.THROTTLEALL a 0 1 1 1 b 0 1 1 1 wait 250ms", "a b"},
		{"CL.THROTTLEALL a 0 1 1 1 b 0 1", "a b"}, // malformed: every fifth, as the positions say
		{"CL.THROTTLEALL wait 0 1 1 1", "wait"},
	}
	for _, c := range cases {
		var args [][]byte
		for _, f := range strings.Fields(c.call) {
			args = append(args, []byte(f))
		}
		var got []string
		for _, k := range throttleAllKeys(nil, args) {
			got = append(got, string(k))
		}
		if strings.Join(got, " ") != c.keys {
			t.Errorf("keys of %q = %q, want %q", c.call, got, c.keys)
		}
	}
}

// A CL.THROTTLEALL's reply waits for the largest Delay of its results: a
// shadowed result comes back over a group's link without its own, and the
// call is due at one instant for every key.
func TestDelayOfThrottleAll(t *testing.T) {
	b := &writeBatch{res: []shards.Result{
		{Results: []engine.Result{{Shadowed: true, RetryAfter: -1}, {Delay: 2e8}}},
		{Results: []engine.Result{{Delay: 3e8}}},
		{Results: []engine.Result{{Limited: true, RetryAfter: 1e8}, {}}},
		{Err: shards.ErrWrongType},
	}}
	for i, want := range []int64{2e8, 3e8, 0, 0} {
		if got := b.delayOf(&slot{op: i}, nil); got != want {
			t.Errorf("op %d: delayOf = %d, want %d", i, got, want)
		}
	}
	if got := b.delayOf(&slot{op: -1}, nil); got != 0 {
		t.Errorf("a failed Prepare: delayOf = %d, want 0", got)
	}
}
