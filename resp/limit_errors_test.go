package resp

import (
	"context"
	"testing"
)

// TestLimiterArgumentErrors: every limiter command's numeric arguments,
// refused, name the argument, the value as given and the range it must be
// in (issue 27, case 8); a value that is not a number keeps Redis's
// generic wording, as redis-cell's clients expect.
func TestLimiterArgumentErrors(t *testing.T) {
	ts := startServer(t, nil)
	c := ts.client(t, 2, "")
	ctx := context.Background()
	const maxCount = "1099511627776" // 2^40
	tests := []struct {
		args []any
		want string
	}{
		// The examples.
		{[]any{"CL.THROTTLE", "kb", "5", maxCount, "1"}, "ERR count_per_period 1099511627776 is out of range: must be 1..1000000000 for this period (period / count_per_period must be at least 1 ns)"},
		{[]any{"TB.TAKE", "tb1", "10", "1", "3661d"}, "ERR refill_period 3661d is out of range: must be 1ms..3660d"},
		{[]any{"CL.THROTTLE", "kb", "5", "5", "316224001"}, "ERR period 316224001 is out of range: must be 1..316224000 seconds"},

		// CL.THROTTLE max_burst count_per_period period [quantity].
		{[]any{"CL.THROTTLE", "k", "-1", "1", "1"}, "ERR max_burst -1 is out of range: must be 0..1099511627776"},
		{[]any{"CL.THROTTLE", "k", "1099511627777", "1", "1"}, "ERR max_burst 1099511627777 is out of range: must be 0..1099511627776"},
		{[]any{"CL.THROTTLE", "k", "99999999999999999999", "1", "1"}, "ERR max_burst 99999999999999999999 is out of range: must be 0..1099511627776"},
		{[]any{"CL.THROTTLE", "k", "100", "1", "316224000"}, "ERR max_burst 100 is out of range: must be 0..13 with these rate and period (the time to refill or drain completely must stay under 2^62 ns, about 146 years)"},
		{[]any{"CL.THROTTLE", "k", "1", "0", "1"}, "ERR count_per_period 0 is out of range: must be 1..1099511627776"},
		{[]any{"CL.THROTTLE", "k", "1", "-3", "1"}, "ERR count_per_period -3 is out of range: must be 1..1099511627776"},
		{[]any{"CL.THROTTLE", "k", "1", "61000000000", "60"}, "ERR count_per_period 61000000000 is out of range: must be 1..60000000000 for this period (period / count_per_period must be at least 1 ns)"},
		{[]any{"CL.THROTTLE", "k", "1", "1", "0"}, "ERR period 0 is out of range: must be 1..316224000 seconds"},
		{[]any{"CL.THROTTLE", "k", "1", "1", "-60"}, "ERR period -60 is out of range: must be 1..316224000 seconds"},
		{[]any{"CL.THROTTLE", "k", "1", "1", "99999999999999999999999"}, "ERR period 99999999999999999999999 is out of range: must be 1..316224000 seconds"},
		{[]any{"CL.THROTTLE", "k", "1", "1", "1", "1099511627777"}, "ERR quantity 1099511627777 is out of range: must be -1099511627776..1099511627776"},
		{[]any{"CL.THROTTLE", "k", "1", "1", "1", "-1099511627777"}, "ERR quantity -1099511627777 is out of range: must be -1099511627776..1099511627776"},
		{[]any{"CL.THROTTLEALL", "a", "1", "1", "1", "-1"}, "ERR limit 1: quantity -1 is out of range: must be 0..1099511627776"},
		{[]any{"CL.THROTTLEALL", "a", "1", "1", "1", "1", "b", "1", "1", "0", "1"}, "ERR limit 2: period 0 is out of range: must be 1..316224000 seconds"},

		// TB.TAKE capacity refill_tokens refill_period [tokens] [INTERVAL].
		{[]any{"TB.TAKE", "t", "0", "1", "1s"}, "ERR capacity 0 is out of range: must be 1..1099511627776"},
		{[]any{"TB.TAKE", "t", "10", "0", "1s"}, "ERR refill_tokens 0 is out of range: must be 1..1099511627776"},
		{[]any{"TB.TAKE", "t", "10", "1", "0ms"}, "ERR refill_period 0ms is out of range: must be 1ms..3660d"},
		{[]any{"TB.TAKE", "t", "10", "1", "-1s"}, "ERR refill_period -1s is out of range: must be 1ms..3660d"},
		{[]any{"TB.TAKE", "t", "10", "1", "106752d"}, "ERR refill_period 106752d is out of range: must be 1ms..3660d"},
		{[]any{"TB.TAKE", "t", "10", "1", "1us"}, `ERR refill_period "1us" is not a duration: expected an integer number of seconds, or an integer with a unit ms, s, m, h or d, from 1ms..3660d`},
		{[]any{"TB.TAKE", "t", "10", "1", "1s", "-1"}, "ERR tokens -1 is out of range: must be 0..1099511627776"},
		{[]any{"TB.TAKE", "t", "15", "1", "3660d"}, "ERR capacity 15 is out of range: must be 1..14 with these rate and period (the time to refill or drain completely must stay under 2^62 ns, about 146 years)"},

		// LB.ADD capacity leak_count leak_period [count].
		{[]any{"LB.ADD", "l", "-5", "1", "1s"}, "ERR capacity -5 is out of range: must be 1..1099511627776"},
		{[]any{"LB.ADD", "l", "10", "1099511627777", "1s"}, "ERR leak_count 1099511627777 is out of range: must be 1..1099511627776"},
		{[]any{"LB.ADD", "l", "10", "1", "3661d"}, "ERR leak_period 3661d is out of range: must be 1ms..3660d"},
		{[]any{"LB.ADD", "l", "10", "1", "1s", "-5"}, "ERR count -5 is out of range: must be 0..1099511627776"},

		// FW.INCR, SW.INCR, SL.ADD limit window [count].
		{[]any{"FW.INCR", "f", "0", "1s"}, "ERR limit 0 is out of range: must be 1..1099511627776"},
		{[]any{"FW.INCR", "f", "10", "0"}, "ERR window 0 is out of range: must be 1ms..3660d"},
		{[]any{"FW.INCR", "f", "10", "5parsecs"}, `ERR window "5parsecs" is not a duration: expected an integer number of seconds, or an integer with a unit ms, s, m, h or d, from 1ms..3660d`},
		{[]any{"SW.INCR", "s", "10", "3661d"}, "ERR window 3661d is out of range: must be 1ms..3660d"},
		{[]any{"SW.INCR", "s", "10", "1m", "1099511627777"}, "ERR count 1099511627777 is out of range: must be 0..1099511627776"},
		{[]any{"SL.ADD", "s", "100001", "1m"}, "ERR limit 100001 is out of range: must be 1..100000 (sl-max-limit)"},
		{[]any{"SL.ADD", "s", "10", "1m", "-1"}, "ERR count -1 is out of range: must be 0..1099511627776"},

		// Not a number: Redis's generic wording, as redis-cell answers.
		{[]any{"CL.THROTTLE", "k", "x", "1", "1"}, "ERR value is not an integer or out of range"},
		{[]any{"CL.THROTTLE", "k", "1", "1", "60s"}, "ERR value is not an integer or out of range"},
		{[]any{"TB.TAKE", "t", "10", "1", "1s", "1.5"}, "ERR value is not an integer or out of range"},
	}
	for _, tc := range tests {
		err := c.Do(ctx, tc.args...).Err()
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v = %v,\n want %s", tc.args, err, tc.want)
		}
	}
}
