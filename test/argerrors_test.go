package test

import (
	"testing"
)

// TestLimiterArgumentErrors: the real binary names the argument, the value
// and its range when a limiter's numeric argument is out of range (issue
// 27, case 8: the three examples it gives, then every other numeric
// argument), and keeps Redis's generic wording for a value that is not a
// number.
func TestLimiterArgumentErrors(t *testing.T) {
	s := startServer(t, "--save", "")
	c := s.client(t, 2)
	ctx := ctxT(t)
	tests := []struct {
		args []any
		want string
	}{
		{[]any{"CL.THROTTLE", "kb", 5, 1099511627776, 1}, "ERR count_per_period 1099511627776 is out of range: must be 1..1000000000 for this period (period / count_per_period must be at least 1 ns)"},
		{[]any{"TB.TAKE", "tb1", 10, 1, "3661d"}, "ERR refill_period 3661d is out of range: must be 1ms..3660d"},
		{[]any{"CL.THROTTLE", "kb", 5, 5, 316224001}, "ERR period 316224001 is out of range: must be 1..316224000 seconds"},

		{[]any{"CL.THROTTLE", "kb", -1, 5, 60}, "ERR max_burst -1 is out of range: must be 0..1099511627776"},
		{[]any{"CL.THROTTLE", "kb", 100, 1, 316224000}, "ERR max_burst 100 is out of range: must be 0..13 with these rate and period (the time to refill or drain completely must stay under 2^62 ns, about 146 years)"},
		{[]any{"CL.THROTTLE", "kb", 5, 0, 60}, "ERR count_per_period 0 is out of range: must be 1..1099511627776"},
		{[]any{"CL.THROTTLE", "kb", 5, 5, 0}, "ERR period 0 is out of range: must be 1..316224000 seconds"},
		{[]any{"CL.THROTTLE", "kb", 5, 5, 60, 1099511627777}, "ERR quantity 1099511627777 is out of range: must be -1099511627776..1099511627776"},
		{[]any{"CL.THROTTLEALL", "a", 1, 1, 1, 1, "b", 1, 1, 1, -1}, "ERR limit 2: quantity -1 is out of range: must be 0..1099511627776"},
		{[]any{"TB.TAKE", "tb1", 0, 1, "1s"}, "ERR capacity 0 is out of range: must be 1..1099511627776"},
		{[]any{"TB.TAKE", "tb1", 10, 0, "1s"}, "ERR refill_tokens 0 is out of range: must be 1..1099511627776"},
		{[]any{"TB.TAKE", "tb1", 10, 1, "1s", -1}, "ERR tokens -1 is out of range: must be 0..1099511627776"},
		{[]any{"LB.ADD", "lb1", 10, 1099511627777, "1s"}, "ERR leak_count 1099511627777 is out of range: must be 1..1099511627776"},
		{[]any{"LB.ADD", "lb1", 10, 1, "0ms"}, "ERR leak_period 0ms is out of range: must be 1ms..3660d"},
		{[]any{"LB.ADD", "lb1", 10, 1, "1s", -2}, "ERR count -2 is out of range: must be 0..1099511627776"},
		{[]any{"FW.INCR", "fw1", 0, "1m"}, "ERR limit 0 is out of range: must be 1..1099511627776"},
		{[]any{"SW.INCR", "sw1", 10, "3661d"}, "ERR window 3661d is out of range: must be 1ms..3660d"},
		{[]any{"SL.ADD", "sl1", 100001, "1m"}, "ERR limit 100001 is out of range: must be 1..100000 (sl-max-limit)"},
		{[]any{"SL.ADD", "sl1", 10, "1w"}, `ERR window "1w" is not a duration: expected an integer number of seconds, or an integer with a unit ms, s, m, h or d, from 1ms..3660d`},
		{[]any{"CL.THROTTLE", "kb", "x", 5, 60}, "ERR value is not an integer or out of range"},
	}
	for _, tc := range tests {
		if err := c.Do(ctx, tc.args...).Err(); err == nil || err.Error() != tc.want {
			t.Errorf("%v = %v,\n want %s", tc.args, err, tc.want)
		}
	}
	// Nothing was created by a refused request.
	if n, err := c.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Errorf("DBSIZE after refusals = %d, %v; want 0", n, err)
	}
}
