package engine

import (
	"errors"
	"strings"
	"testing"
)

func TestParseInt(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"1", 1, true},
		{"-1", -1, true},
		{"42", 42, true},
		{"9223372036854775807", 1<<63 - 1, true},
		{"-9223372036854775808", -1 << 63, true},
		{"9223372036854775808", 0, false},   // MaxInt64 + 1
		{"-9223372036854775809", 0, false},  // MinInt64 − 1
		{"18446744073709551616", 0, false},  // 2^64: overflows even unsigned
		{"99999999999999999999", 0, false},  // 20 digits, beyond uint64
		{"100000000000000000000", 0, false}, // 21 bytes: too long
		{"", 0, false},
		{"-", 0, false},
		{"-0", 0, false}, // string2ll refuses it
		{"00", 0, false},
		{"007", 0, false},
		{"+5", 0, false},
		{" 5", 0, false},
		{"5 ", 0, false},
		{"5s", 0, false},
		{"1e3", 0, false},
		{"1.0", 0, false},
		{"--1", 0, false},
		{"\x00", 0, false},
	}
	for _, c := range cases {
		got, err := ParseInt([]byte(c.in))
		if c.ok && (err != nil || got != c.want) {
			t.Errorf("ParseInt(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
		if !c.ok && !errors.Is(err, ErrNotInteger) {
			t.Errorf("ParseInt(%q) = %d, %v; want ErrNotInteger", c.in, got, err)
		}
	}
}

func TestParseDuration(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		err  error
	}{
		{"60", 60 * sec, nil}, // no unit: seconds
		{"0", 0, nil},
		{"500ms", 500 * ms, nil},
		{"500MS", 500 * ms, nil},
		{"500mS", 500 * ms, nil},
		{"2s", 2 * sec, nil},
		{"2S", 2 * sec, nil},
		{"15m", 15 * 60 * sec, nil},
		{"15M", 15 * 60 * sec, nil}, // any case: M is minutes
		{"1h", 3600 * sec, nil},
		{"3d", 3 * 86400 * sec, nil},
		{"3D", 3 * 86400 * sec, nil},
		{"-5s", -5 * sec, nil},                      // range checks are the caller's
		{"9223372036854775807ms", 0, ErrNotInteger}, // × 1e6 overflows
		{"106751d", 106751 * 86400 * sec, nil},      // 9.22e18 ns: still fits
		{"106752d", 0, ErrNotInteger},               // 106752 × 86400e9 > MaxInt64
		{"99999999999999999999s", 0, ErrNotInteger}, // digits, beyond int64
		{"", 0, ErrInvalidDuration},
		{"s", 0, ErrInvalidDuration},
		{"ms", 0, ErrInvalidDuration},
		{"5x", 0, ErrInvalidDuration},
		{"5sec", 0, ErrInvalidDuration},
		{"5 s", 0, ErrInvalidDuration},
		{"1.5s", 0, ErrInvalidDuration},
		{"05s", 0, ErrInvalidDuration},
		{"+5s", 0, ErrInvalidDuration},
		{"5us", 0, ErrInvalidDuration},
		{"5ns", 0, ErrInvalidDuration},
		{"1h30m", 0, ErrInvalidDuration},
	}
	for _, c := range cases {
		got, err := ParseDuration([]byte(c.in))
		if c.err == nil && (err != nil || got != c.want) {
			t.Errorf("ParseDuration(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
		if c.err != nil && !errors.Is(err, c.err) {
			t.Errorf("ParseDuration(%q) = %d, %v; want %v", c.in, got, err, c.err)
		}
	}
}

func TestParseRequest(t *testing.T) {
	cases := []struct {
		kind Kind
		args string // space-separated
		want Request
		err  error
	}{
		// CL.THROTTLE
		{KindGCRA, "15 30 60", Request{Kind: KindGCRA, Burst: 15, Rate: 30, Period: 60 * sec, Quantity: 1}, nil},
		{KindGCRA, "15 30 60 0", Request{Kind: KindGCRA, Burst: 15, Rate: 30, Period: 60 * sec, Quantity: 0}, nil},
		{KindGCRA, "15 30 60 -3", Request{Kind: KindGCRA, Burst: 15, Rate: 30, Period: 60 * sec, Quantity: -3}, nil},
		{KindGCRA, "0 1 1", Request{Kind: KindGCRA, Burst: 0, Rate: 1, Period: sec, Quantity: 1}, nil},
		{KindGCRA, "1099511627776 1099511627776 1", Request{}, ErrZero},                                                         // T = 1 s / 2^40 = 0
		{KindGCRA, "1099511627776 1000 1", Request{Kind: KindGCRA, Burst: MaxCount, Rate: 1000, Period: sec, Quantity: 1}, nil}, // τ = 1 ms × (2^40+1) ≈ 1.1e15 ns
		{KindGCRA, "13 1 316224000", Request{Kind: KindGCRA, Burst: 13, Rate: 1, Period: MaxPeriod, Quantity: 1}, nil},          // τ = 14 × 3.16224e17 = 4.43e18 <= 2^62 = 4.61e18
		{KindGCRA, "14 1 316224000", Request{}, ErrOverflow},                                                                    // τ = 15 × 3.16224e17 = 4.74e18 > 2^62
		{KindGCRA, "15 30 316224001", Request{}, ErrNotInteger},                                                                 // above MaxPeriod
		{KindGCRA, "15 30 0", Request{}, ErrZero},
		{KindGCRA, "15 0 60", Request{}, ErrZero},
		{KindGCRA, "15 61000000000 60", Request{}, ErrZero}, // T = 60e9 ns / 61e9 = 0
		{KindGCRA, "-1 30 60", Request{}, ErrNegative},
		{KindGCRA, "15 -30 60", Request{}, ErrNegative},
		{KindGCRA, "15 30 -60", Request{}, ErrNegative},
		{KindGCRA, "1099511627777 30 60", Request{}, ErrNotInteger}, // 2^40 + 1
		{KindGCRA, "15 30 60 1099511627777", Request{}, ErrNotInteger},
		{KindGCRA, "15 30 60 -1099511627777", Request{}, ErrNotInteger},
		{KindGCRA, "15 30 60s", Request{}, ErrNotInteger}, // whole seconds only, as redis-cell
		{KindGCRA, "x 30 60", Request{}, ErrNotInteger},
		{KindGCRA, "15 30", Request{}, ErrArity},
		{KindGCRA, "15 30 60 1 1", Request{}, ErrArity},
		// TB.TAKE
		{KindTokenBucket, "10 2 1s", Request{Kind: KindTokenBucket, Burst: 10, Rate: 2, Period: sec, Quantity: 1}, nil},
		{KindTokenBucket, "10 2 500ms 3", Request{Kind: KindTokenBucket, Burst: 10, Rate: 2, Period: 500 * ms, Quantity: 3}, nil},
		{KindTokenBucket, "10 2 4 INTERVAL", Request{Kind: KindTokenBucket, Burst: 10, Rate: 2, Period: 4 * sec, Quantity: 1, Interval: true}, nil},
		{KindTokenBucket, "10 2 4 0 interval", Request{Kind: KindTokenBucket, Burst: 10, Rate: 2, Period: 4 * sec, Quantity: 0, Interval: true}, nil},
		{KindTokenBucket, "10 2 4 3 fast", Request{}, ErrSyntax},
		{KindTokenBucket, "10 2 4 fast", Request{}, ErrNotInteger},
		{KindTokenBucket, "10 2 4 1 INTERVAL x", Request{}, ErrArity},
		{KindTokenBucket, "10 2 4 -1", Request{}, ErrNegative},
		{KindTokenBucket, "0 2 4", Request{}, ErrZero},
		{KindTokenBucket, "10 0 4", Request{}, ErrZero},
		{KindTokenBucket, "10 2 0ms", Request{}, ErrZero},
		{KindTokenBucket, "10 2 4x", Request{}, ErrInvalidDuration},
		{KindTokenBucket, "10 2 3661d", Request{}, ErrNotInteger},                                                                // above MaxPeriod (3660 d)
		{KindTokenBucket, "14 1 3660d", Request{Kind: KindTokenBucket, Burst: 14, Rate: 1, Period: MaxPeriod, Quantity: 1}, nil}, // 14 × 3.16e17 <= 2^62
		{KindTokenBucket, "15 1 3660d", Request{}, ErrOverflow},                                                                  // 15 × 3.16e17 > 2^62
		{KindTokenBucket, "15 2 3660d", Request{Kind: KindTokenBucket, Burst: 15, Rate: 2, Period: MaxPeriod, Quantity: 1}, nil}, // ⌈15/2⌉ = 8 periods: fits
		// LB.ADD
		{KindLeakyBucket, "40 2 1s", Request{Kind: KindLeakyBucket, Burst: 40, Rate: 2, Period: sec, Quantity: 1}, nil},
		{KindLeakyBucket, "40 2 1s 5", Request{Kind: KindLeakyBucket, Burst: 40, Rate: 2, Period: sec, Quantity: 5}, nil},
		{KindLeakyBucket, "40 2 1s 5 INTERVAL", Request{}, ErrArity},
		{KindLeakyBucket, "40 2 1s -5", Request{}, ErrNegative},
		{KindLeakyBucket, "1099511627776 1 1d", Request{}, ErrOverflow}, // 2^40 days
		// FW.INCR, SW.INCR, SL.ADD
		{KindFixedWindow, "5000 1h", Request{Kind: KindFixedWindow, Burst: 5000, Period: 3600 * sec, Quantity: 1}, nil},
		{KindFixedWindow, "5000 1h 7", Request{Kind: KindFixedWindow, Burst: 5000, Period: 3600 * sec, Quantity: 7}, nil},
		{KindSlidingWindow, "100 60", Request{Kind: KindSlidingWindow, Burst: 100, Period: 60 * sec, Quantity: 1}, nil},
		{KindSlidingWindow, "1099511627776 3660d 1099511627776", Request{Kind: KindSlidingWindow, Burst: MaxCount, Period: MaxPeriod, Quantity: MaxCount}, nil},
		{KindSlidingLog, "100000 1m", Request{Kind: KindSlidingLog, Burst: 100000, Period: 60 * sec, Quantity: 1}, nil},
		{KindSlidingLog, "100001 1m", Request{}, ErrLogLimit},
		{KindFixedWindow, "0 1h", Request{}, ErrZero},
		{KindFixedWindow, "-1 1h", Request{}, ErrNegative},
		{KindFixedWindow, "10 0", Request{}, ErrZero},
		{KindFixedWindow, "10 -1s", Request{}, ErrNegative},
		{KindFixedWindow, "10 1h -1", Request{}, ErrNegative},
		{KindFixedWindow, "10", Request{}, ErrArity},
		{KindFixedWindow, "10 1h 1 1", Request{}, ErrArity},
		{KindSlidingLog, "10 1h INTERVAL", Request{}, ErrNotInteger},
		{KindNone, "10 1h", Request{}, ErrSyntax},
	}
	for _, c := range cases {
		got, err := ParseRequest(c.kind, args(strings.Fields(c.args)...), DefaultParseOptions())
		if c.err == nil {
			if err != nil || got != c.want {
				t.Errorf("ParseRequest(%v, %q) = %+v, %v; want %+v", c.kind, c.args, got, err, c.want)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Validate(ParseRequest(%v, %q)) = %v", c.kind, c.args, err)
			}
			continue
		}
		if !errors.Is(err, c.err) {
			t.Errorf("ParseRequest(%v, %q) = %+v, %v; want %v", c.kind, c.args, got, err, c.err)
		}
	}
}

func TestParseRequestLogLimitOption(t *testing.T) {
	a := args("500", "1s")
	if _, err := ParseRequest(KindSlidingLog, a, ParseOptions{MaxLogLimit: 499}); !errors.Is(err, ErrLogLimit) {
		t.Errorf("limit 500 with MaxLogLimit 499: err = %v, want ErrLogLimit", err)
	}
	if _, err := ParseRequest(KindSlidingLog, a, ParseOptions{MaxLogLimit: 500}); err != nil {
		t.Errorf("limit 500 with MaxLogLimit 500: err = %v", err)
	}
	if _, err := ParseRequest(KindSlidingLog, args("100000", "1s"), ParseOptions{}); err != nil {
		t.Errorf("zero options mean the default: err = %v", err)
	}
	// Other kinds ignore the option.
	if _, err := ParseRequest(KindFixedWindow, a, ParseOptions{MaxLogLimit: 1}); err != nil {
		t.Errorf("FW with MaxLogLimit 1: err = %v", err)
	}
}

func TestParseErrorNamesParameter(t *testing.T) {
	cases := []struct {
		kind Kind
		args string
		name string
	}{
		{KindGCRA, "-1 30 60", "max_burst"},
		{KindGCRA, "1 0 60", "count_per_period"},
		{KindGCRA, "1 1 x", "period"},
		{KindTokenBucket, "10 0 1s", "refill_tokens"},
		{KindLeakyBucket, "10 0 1s", "leak_count"},
		{KindLeakyBucket, "10 1 1s -1", "count"},
		{KindSlidingWindow, "10 0", "window"},
		{KindFixedWindow, "x 1s", "limit"},
	}
	for _, c := range cases {
		_, err := ParseRequest(c.kind, args(strings.Fields(c.args)...), DefaultParseOptions())
		if err == nil || !strings.Contains(err.Error(), c.name) {
			t.Errorf("ParseRequest(%v, %q) error %v does not name %s", c.kind, c.args, err, c.name)
		}
	}
}

func TestParseThrottleAll(t *testing.T) {
	keys, reqs, err := ParseThrottleAll(args("global", "999", "1000", "1", "1", "user:1", "4", "1", "1", "2"), DefaultParseOptions())
	if err != nil {
		t.Fatalf("ParseThrottleAll: %v", err)
	}
	if len(keys) != 2 || string(keys[0]) != "global" || string(keys[1]) != "user:1" {
		t.Fatalf("keys = %q", keys)
	}
	want := []Request{
		{Kind: KindGCRA, Burst: 999, Rate: 1000, Period: sec, Quantity: 1},
		{Kind: KindGCRA, Burst: 4, Rate: 1, Period: sec, Quantity: 2},
	}
	if len(reqs) != 2 || reqs[0] != want[0] || reqs[1] != want[1] {
		t.Fatalf("reqs = %+v, want %+v", reqs, want)
	}
	bad := []struct {
		args string
		err  error
	}{
		{"", ErrArity},
		{"k 1 1 1", ErrArity}, // quantity required
		{"k 1 1 1 1 k2", ErrArity},
		{"k 1 1 1 -1", ErrNegative}, // no refunds here
		{"k 1 1 1 1 k2 1 0 1 1", ErrZero},
	}
	for _, c := range bad {
		if _, _, err := ParseThrottleAll(args(strings.Fields(c.args)...), DefaultParseOptions()); !errors.Is(err, c.err) {
			t.Errorf("ParseThrottleAll(%q) = %v, want %v", c.args, err, c.err)
		}
	}
}

// TestValidateSpan checks the span rule at its edges for each kind.
func TestValidateSpan(t *testing.T) {
	cases := []struct {
		req Request
		err error
	}{
		// GCRA: τ = T × (burst+1); T = 2^32 ns, burst+1 = 2^30 → τ = 2^62 exactly: allowed.
		{Request{Kind: KindGCRA, Burst: 1<<30 - 1, Rate: 1, Period: 1 << 32}, nil},
		{Request{Kind: KindGCRA, Burst: 1 << 30, Rate: 1, Period: 1 << 32}, ErrOverflow},
		// Buckets: ⌈capacity/rate⌉ × period; 2^30 × 2^32 = 2^62: allowed.
		{Request{Kind: KindTokenBucket, Burst: 1 << 30, Rate: 1, Period: 1 << 32}, nil},
		{Request{Kind: KindTokenBucket, Burst: 1<<30 + 1, Rate: 1, Period: 1 << 32}, ErrOverflow},
		{Request{Kind: KindTokenBucket, Burst: 1<<31 - 1, Rate: 2, Period: 1 << 32, Interval: true}, nil}, // ⌈(2^31−1)/2⌉ = 2^30
		{Request{Kind: KindLeakyBucket, Burst: 1<<31 + 1, Rate: 2, Period: 1 << 32}, ErrOverflow},         // ⌈(2^31+1)/2⌉ = 2^30+1
		{Request{Kind: KindLeakyBucket, Burst: MaxCount, Rate: MaxCount, Period: MaxPeriod}, nil},         // one period
		{Request{Kind: KindFixedWindow, Burst: MaxCount, Period: MaxPeriod, Quantity: MaxCount}, nil},     // windows always fit
		{Request{Kind: KindSlidingLog, Burst: MaxCount, Period: MaxPeriod, Quantity: MaxCount}, nil},      // (the log limit is ParseRequest's)
		{Request{Kind: KindFixedWindow, Burst: 1, Rate: 1, Period: sec}, ErrSyntax},                       // windows have no rate
		{Request{Kind: KindGCRA, Burst: 1, Rate: 1, Period: sec, Interval: true}, ErrSyntax},              // INTERVAL is the token bucket's
		{Request{Kind: Kind(99), Burst: 1, Rate: 1, Period: sec}, ErrSyntax},
	}
	for _, c := range cases {
		err := c.req.Validate()
		if c.err == nil && err != nil || c.err != nil && !errors.Is(err, c.err) {
			t.Errorf("Validate(%+v) = %v, want %v", c.req, err, c.err)
		}
	}
}

// TestParseRequestNoAlloc: the success path of parsing allocates nothing.
func TestParseRequestNoAlloc(t *testing.T) {
	a := args("15", "30", "60", "1")
	b := args("10", "2", "500ms", "3", "INTERVAL")
	opt := DefaultParseOptions()
	if n := testing.AllocsPerRun(100, func() {
		_, _ = ParseRequest(KindGCRA, a, opt)
		_, _ = ParseRequest(KindTokenBucket, b, opt)
	}); n != 0 {
		t.Errorf("ParseRequest allocates %v times per call", n)
	}
}

// TestParseKind: every kind's name parses back to it in any ASCII letter
// case, and nothing else parses (Unicode case folding is not applied).
func TestParseKind(t *testing.T) {
	for k := KindNone; k < numKinds; k++ {
		for _, s := range []string{k.String(), strings.ToUpper(k.String())} {
			if got, ok := ParseKind(s); !ok || got != k {
				t.Errorf("ParseKind(%q) = %v, %v; want %v, true", s, got, ok, k)
			}
		}
	}
	for _, s := range []string{"", "gcra ", "token_bucket", "unknown", "slidinglog", "to\u212Aen-bucket"} { // U+212A KELVIN SIGN folds to k in Unicode
		if got, ok := ParseKind(s); ok {
			t.Errorf("ParseKind(%q) = %v, true; want false", s, got)
		}
	}
}
