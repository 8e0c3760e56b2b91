package resp

import (
	"strings"
	"testing"
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
