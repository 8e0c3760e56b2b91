package engine

import (
	"errors"
	"math/big"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseInt: ParseInt accepts exactly the canonical decimal spelling of an
// int64 (what strconv.FormatInt prints), and nothing else.
func FuzzParseInt(f *testing.F) {
	for _, s := range []string{"0", "-1", "42", "9223372036854775807", "-9223372036854775808", "007", "+1", "-0", " 1", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseInt(b)
		if err != nil {
			if !errors.Is(err, ErrNotInteger) {
				t.Fatalf("ParseInt(%q) error %v is not ErrNotInteger", b, err)
			}
			if w, perr := strconv.ParseInt(string(b), 10, 64); perr == nil && strconv.FormatInt(w, 10) == string(b) {
				t.Fatalf("ParseInt(%q) refused the canonical spelling of %d", b, w)
			}
			return
		}
		if s := strconv.FormatInt(v, 10); s != string(b) {
			t.Fatalf("ParseInt(%q) = %d, whose canonical spelling is %q", b, v, s)
		}
	})
}

// FuzzParseDuration: a duration parses iff it is a canonical integer followed
// by a known unit, and its value is the exact product unless that overflows
// int64 (then ErrNotInteger).
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"60", "500ms", "2S", "15m", "1H", "3d", "-5s", "106752d", "1.5s", "5x", "", "ms"} {
		f.Add([]byte(s))
	}
	units := map[string]int64{"": 1e9, "ms": 1e6, "s": 1e9, "m": 60e9, "h": 3600e9, "d": 86400e9}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseDuration(b)
		s := string(b)
		// Split the trailing ASCII letters off as ParseDuration does.
		j := len(b)
		for j > 0 && isLetter(b[j-1]) {
			j--
		}
		num, unit := s[:j], strings.ToLower(s[j:])
		mult, knownUnit := units[unit]
		n, perr := strconv.ParseInt(num, 10, 64)
		canonical := perr == nil && strconv.FormatInt(n, 10) == num
		if !knownUnit || !canonical {
			if err == nil {
				// Overflowing digit strings are the one other way to fail.
				t.Fatalf("ParseDuration(%q) = %d, want an error", b, v)
			}
			if !errors.Is(err, ErrInvalidDuration) && !errors.Is(err, ErrNotInteger) {
				t.Fatalf("ParseDuration(%q) error %v", b, err)
			}
			return
		}
		p := new(big.Int).Mul(big.NewInt(n), big.NewInt(mult))
		if !p.IsInt64() {
			if !errors.Is(err, ErrNotInteger) {
				t.Fatalf("ParseDuration(%q) = %d, %v; want ErrNotInteger (overflow)", b, v, err)
			}
			return
		}
		if err != nil || v != p.Int64() {
			t.Fatalf("ParseDuration(%q) = %d, %v; want %d", b, v, err, p.Int64())
		}
	})
}

// FuzzParseRequest: any argument list either parses into a request that
// validates and applies without breaking an invariant, or fails with one of
// the package's errors; never a panic.
func FuzzParseRequest(f *testing.F) {
	seeds := []struct {
		kind uint8
		args string
	}{
		{1, "15 30 60"}, {1, "15 30 60 -2"}, {1, "14 1 316224000"}, {1, "0 1099511627776 1"},
		{2, "10 2 1s"}, {2, "10 2 4 3 INTERVAL"}, {2, "10 2 4 interval"}, {2, "1099511627776 1 1ms"},
		{3, "40 2 1s 5"}, {4, "5000 1h"}, {5, "100 60 0"}, {6, "100000 1m 1"}, {6, "100001 1m"},
		{0, "1 1"}, {9, "1 1 1"},
	}
	for _, s := range seeds {
		f.Add(s.kind, s.args)
	}
	sentinels := []error{ErrArity, ErrSyntax, ErrNotInteger, ErrInvalidDuration, ErrNegative, ErrZero, ErrOverflow, ErrLogLimit}
	f.Fuzz(func(t *testing.T, kind uint8, line string) {
		k := Kind(kind % (uint8(numKinds) + 2))
		req, err := ParseRequest(k, args(strings.Split(line, " ")...), DefaultParseOptions())
		if err != nil {
			for _, s := range sentinels {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("ParseRequest(%v, %q): unknown error %v", k, line, err)
		}
		if req.Kind != k {
			t.Fatalf("ParseRequest(%v, %q) = kind %v", k, line, req.Kind)
		}
		if err := req.Validate(); err != nil {
			t.Fatalf("ParseRequest(%v, %q) = %+v, which fails Validate: %v", k, line, req, err)
		}
		st, _, err := checkStep(State{}, &req, t0, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := checkStep(st, &req, t0+1, true); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzApply: arbitrary parameters, start time and arrival sequence for any
// kind. Each step of seq takes three bytes: the gap before the request (as a
// fraction or a multiple of the period), the quantity, and (odd) a peek at
// the same instant afterwards. Every step must pass checkStep.
func FuzzApply(f *testing.F) {
	f.Add(uint8(1), int64(4), int64(1), int64(1e9), false, t0, []byte{0, 1, 0, 0, 1, 0, 0, 6, 0, 128, 1, 0, 200, 250, 0})
	f.Add(uint8(2), int64(10), int64(2), int64(4e9), true, t0, []byte{0, 10, 0, 1, 3, 0, 64, 255, 0, 255, 254, 0})
	f.Add(uint8(3), int64(40), int64(2), int64(1e9), false, t0, []byte{0, 30, 0, 2, 11, 0, 0, 0, 0, 100, 40, 0})
	f.Add(uint8(4), int64(5000), int64(0), int64(3600e9), false, t0, []byte{0, 255, 0, 0, 200, 1, 250, 2, 0})
	f.Add(uint8(5), int64(100), int64(0), int64(60e9), false, t0, []byte{0, 99, 0, 32, 5, 0, 64, 1, 0, 200, 0, 0})
	f.Add(uint8(6), int64(3), int64(0), int64(1e9), false, t0, []byte{0, 1, 0, 16, 1, 0, 16, 1, 0, 16, 1, 0, 64, 3, 0})
	f.Add(uint8(1), MaxCount, MaxCount, MaxPeriod, false, int64(0), []byte{0, 255, 0, 255, 254, 0, 255, 200, 0})
	f.Add(uint8(2), MaxCount, int64(1), int64(1), true, int64(maxNow-1e18), []byte{0, 255, 0, 1, 1, 0})
	f.Fuzz(func(t *testing.T, kind uint8, burst, rate, period int64, interval bool, now int64, seq []byte) {
		k := allKinds[int(kind)%len(allKinds)]
		req := Request{Kind: k, Burst: absMod(burst, MaxCount+1), Period: 1 + absMod(period, MaxPeriod)}
		switch k {
		case KindGCRA:
			req.Rate = 1 + absMod(rate, MaxCount)
			req.Period = (req.Period + sec - 1) / sec * sec
		case KindTokenBucket:
			req.Rate = 1 + absMod(rate, MaxCount)
			req.Interval = interval
		case KindLeakyBucket:
			req.Rate = 1 + absMod(rate, MaxCount)
		case KindSlidingLog:
			req.Burst %= 5000
		}
		if req.Validate() != nil {
			return
		}
		lim := wantLimit(&req)
		now = absMod(now, maxNow/2)
		var st State
		for i := 0; i+2 < len(seq) && i < 3*500; i += 3 {
			g, q := int64(seq[i]), int64(seq[i+1])
			var gap int64
			switch {
			case g < 128: // a fraction of the period
				if req.Period < 1<<55 {
					gap = req.Period * g / 128
				} else {
					gap = req.Period / 128 * g
				}
			case g < 192: // a few nanoseconds
				gap = g - 128
			default: // 1 to 64 periods
				if m := g - 191; req.Period <= maxNow/m {
					gap = req.Period * m
				} else {
					return // beyond the clock's range
				}
			}
			if now += gap; now >= maxNow {
				return
			}
			switch {
			case q == 255:
				req.Quantity = min(lim, MaxCount)
			case q == 254:
				req.Quantity = min(lim+1, MaxCount)
			case q >= 200 && k == KindGCRA:
				req.Quantity = 199 - q // refunds −1 … −54
			default:
				req.Quantity = min(q, MaxCount)
			}
			next, _, err := checkStep(st, &req, now, true)
			if err != nil {
				t.Fatalf("step %d: %v", i/3, err)
			}
			if !live(next, now) {
				next = State{}
			}
			st = next
			if seq[i+2]&1 == 1 {
				peek := req
				peek.Quantity = 0
				if st, _, err = checkStep(st, &peek, now, true); err != nil {
					t.Fatalf("step %d, peek: %v", i/3, err)
				}
				if !live(st, now) {
					st = State{}
				}
			}
		}
	})
}

// absMod maps any int64 into [0, m).
func absMod(v, m int64) int64 {
	v %= m
	if v < 0 {
		v += m
	}
	return v
}
