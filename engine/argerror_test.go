package engine

import (
	"errors"
	"strings"
	"testing"
)

// TestArgError: a refused argument is an *ArgError naming it, with its
// text as given, its range in its unit and what narrows that range; the
// sentinel it wraps still answers errors.Is.
func TestArgError(t *testing.T) {
	tests := []struct {
		kind     Kind
		args     string
		arg      string
		value    string
		min, max int64
		unit     Unit
		bound    Bound
		sentinel error
	}{
		{KindGCRA, "5 1099511627776 1", "count_per_period", "1099511627776", 1, 1e9, UnitCount, BoundPerNanosecond, ErrZero},
		{KindGCRA, "5 5 316224001", "period", "316224001", 1, MaxPeriod / 1e9, UnitSeconds, BoundOwn, ErrNotInteger},
		{KindGCRA, "5 5 -1", "period", "-1", 1, MaxPeriod / 1e9, UnitSeconds, BoundOwn, ErrNegative},
		{KindGCRA, "14 1 316224000", "max_burst", "14", 0, 13, UnitCount, BoundSpan, ErrOverflow},
		{KindGCRA, "99999999999999999999 1 1", "max_burst", "99999999999999999999", 0, MaxCount, UnitCount, BoundOwn, ErrNotInteger},
		{KindTokenBucket, "10 1 3661d", "refill_period", "3661d", 1e6, MaxPeriod, UnitDuration, BoundOwn, ErrNotInteger},
		{KindTokenBucket, "10 1 4x", "refill_period", "4x", 1e6, MaxPeriod, UnitDuration, BoundOwn, ErrInvalidDuration},
		{KindTokenBucket, "15 1 3660d", "capacity", "15", 1, 14, UnitCount, BoundSpan, ErrOverflow},
		{KindLeakyBucket, "10 0 1s", "leak_count", "0", 1, MaxCount, UnitCount, BoundOwn, ErrZero},
		{KindFixedWindow, "10 1h -1", "count", "-1", 0, MaxCount, UnitCount, BoundOwn, ErrNegative},
		{KindSlidingLog, "100001 1m", "limit", "100001", 1, DefaultMaxLogLimit, UnitCount, BoundLogLimit, ErrLogLimit},
	}
	for _, tc := range tests {
		_, err := ParseRequest(tc.kind, splitArgs(tc.args), DefaultParseOptions())
		var ae *ArgError
		if !errors.As(err, &ae) {
			t.Errorf("ParseRequest(%v, %s) = %v, want an *ArgError", tc.kind, tc.args, err)
			continue
		}
		if ae.Arg != tc.arg || ae.Value != tc.value || ae.Min != tc.min || ae.Max != tc.max || ae.Unit != tc.unit || ae.Bound != tc.bound || !errors.Is(err, tc.sentinel) {
			t.Errorf("ParseRequest(%v, %s) = %+v, want %s %s %d..%d unit %d bound %d (%v)", tc.kind, tc.args, *ae, tc.arg, tc.value, tc.min, tc.max, tc.unit, tc.bound, tc.sentinel)
		}
	}
	// Not a number: the generic sentinel, no range.
	if _, err := ParseRequest(KindGCRA, splitArgs("x 1 1"), DefaultParseOptions()); !errors.Is(err, ErrNotInteger) || errors.As(err, new(*ArgError)) {
		t.Errorf("ParseRequest(x 1 1) = %v, want ErrNotInteger without a range", err)
	}
}

func TestFormatDuration(t *testing.T) {
	for ns, want := range map[int64]string{MaxPeriod: "3660d", 1e6: "1ms", 90e9: "90s", 3600e9: "1h", 1500e6: "1500ms", 0: "0", 1500: "1.5µs"} {
		if got := FormatDuration(ns); got != want {
			t.Errorf("FormatDuration(%d) = %s, want %s", ns, got, want)
		}
	}
}

func splitArgs(s string) [][]byte {
	var out [][]byte
	for _, f := range strings.Fields(s) {
		out = append(out, []byte(f))
	}
	return out
}
