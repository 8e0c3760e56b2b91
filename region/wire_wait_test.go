package region

import (
	"testing"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/respclient"
)

// A global key's waiting request is decided at its home: REGION.EXEC's reply
// carries an admitted waiter's delay (a seventh field), so that the region
// the client is connected to answers it at its turn; a reply without it
// reads as before.
func TestResultDelayRoundTrip(t *testing.T) {
	in := []engine.Result{
		{Limit: 1, RetryAfter: -1, ResetAfter: 1e8, Delay: 3e8},
		{Limited: true, Limit: 1, RetryAfter: 5e8, ResetAfter: 6e8},
		{Limit: 1, Remaining: 1, RetryAfter: -1},
		// A CC.ACQUIRE … WAIT in the home's line: its client waits.
		{Limited: true, Queued: true, Limit: 1, RetryAfter: 7e8, ResetAfter: 7e8},
	}
	v := respclient.Value{Kind: respclient.Array}
	for i := range in {
		e := respclient.Value{Kind: respclient.Array}
		for _, n := range EncodeResult(nil, &in[i]) {
			e.Elems = append(e.Elems, respclient.Value{Kind: respclient.Integer, Int: n})
		}
		v.Elems = append(v.Elems, e)
	}
	if got := len(v.Elems[0].Elems); got != resultFields+1 {
		t.Fatalf("a delayed result has %d fields, want %d", got, resultFields+1)
	}
	if got := len(v.Elems[1].Elems); got != resultFields {
		t.Fatalf("a result without delay has %d fields, want %d (as older regions read)", got, resultFields)
	}
	out := make([]engine.Result, len(in))
	if err := decodeResults(v, len(in), out); err != nil {
		t.Fatalf("decodeResults = %v", err)
	}
	for i := range in {
		if out[i] != in[i] {
			t.Errorf("result %d = %+v, want %+v", i, out[i], in[i])
		}
	}
	// A first field other than 0, 1 or 2 is malformed.
	v.Elems[3].Elems[0].Int = 3
	if err := decodeResults(v, len(in), out); err == nil {
		t.Errorf("decodeResults accepted a limited field of 3")
	}
	v.Elems[3].Elems[0].Int = 2
	// A limited result with a delay is malformed.
	v.Elems[1].Elems = append(v.Elems[1].Elems, respclient.Value{Kind: respclient.Integer, Int: 5})
	if err := decodeResults(v, len(in), out); err == nil {
		t.Errorf("decodeResults accepted a limited result with a delay")
	}
}
