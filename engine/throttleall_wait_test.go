package engine

import (
	"errors"
	"strings"
	"testing"
)

// CL.THROTTLEALL's trailing WAIT sets every request's Wait; a bad one is
// refused unprefixed, a span overflow by its limit's position.
func TestParseThrottleAllWait(t *testing.T) {
	keys, reqs, err := ParseThrottleAll(args("a", "0", "10", "1", "1", "b", "4", "1", "1", "2", "wait", "250ms"), DefaultParseOptions())
	if err != nil {
		t.Fatalf("ParseThrottleAll: %v", err)
	}
	if len(keys) != 2 || string(keys[1]) != "b" {
		t.Fatalf("keys = %q", keys)
	}
	for i, r := range reqs {
		if r.Wait != 250e6 {
			t.Errorf("request %d: Wait = %d, want 250ms", i+1, r.Wait)
		}
	}
	bad := []struct {
		args string
		err  error
		text string
	}{
		{"k 1 1 1 1 WAIT", ErrArity, ""},
		{"k 1 1 1 1 WAIT 1 2", ErrArity, ""},
		{"k 1 1 1 1 WAIT -1", ErrNegative, "WAIT"},
		{"k 1 1 1 1 WAIT soon", ErrInvalidDuration, "WAIT"},
		{"k 1 1 1 1 WAIT 2d", ErrNotInteger, "WAIT"},
		{"k 1 1 1 1 k2 1 0 1 1 WAIT 1", ErrZero, "limit 2"},
	}
	for _, c := range bad {
		_, _, err := ParseThrottleAll(args(strings.Fields(c.args)...), DefaultParseOptions())
		if !errors.Is(err, c.err) || !strings.HasPrefix(errText(err), c.text) {
			t.Errorf("ParseThrottleAll(%q) = %v, want %v starting %q", c.args, err, c.err, c.text)
		}
	}
	// The group's arguments are not written over by WAIT's.
	a := args("k", "1", "1", "1", "1", "k2", "1", "1", "1", "1", "WAIT", "1")
	if _, _, err := ParseThrottleAll(a, DefaultParseOptions()); err != nil || string(a[5]) != "k2" {
		t.Errorf("ParseThrottleAll: %v, args after = %q", err, a)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
