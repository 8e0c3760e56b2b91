package engine

import "testing"

// BenchmarkApply answers: what does one limiter decision cost, per kind, on a
// hot key that is sometimes allowed and sometimes limited? The same body
// runs for every kind. "reference" is a call of the same shape that does no
// limiter work; quote each kind as a ratio to it (the machine is shared and
// noisy). Target: 0 allocs/op for every kind but the sliding log.
func BenchmarkApply(b *testing.B) {
	cases := []struct {
		name string
		req  Request
		step int64 // clock advance per request: about the sustained rate, so both outcomes occur
	}{
		{"reference", Request{Kind: KindNone}, 1e6},
		{KindGCRA.String(), Request{Kind: KindGCRA, Burst: 15, Rate: 30, Period: 60 * sec, Quantity: 1}, 1900 * ms},
		{KindTokenBucket.String(), Request{Kind: KindTokenBucket, Burst: 100, Rate: 10, Period: sec, Quantity: 1}, 95 * ms},
		{KindTokenBucket.String() + "-interval", Request{Kind: KindTokenBucket, Burst: 100, Rate: 10, Period: sec, Quantity: 1, Interval: true}, 95 * ms},
		{KindLeakyBucket.String(), Request{Kind: KindLeakyBucket, Burst: 40, Rate: 2, Period: sec, Quantity: 1}, 480 * ms},
		{KindFixedWindow.String(), Request{Kind: KindFixedWindow, Burst: 5000, Period: 3600 * sec, Quantity: 1}, 700 * ms},
		{KindSlidingWindow.String(), Request{Kind: KindSlidingWindow, Burst: 100, Period: 60 * sec, Quantity: 1}, 580 * ms},
		{KindSlidingLog.String(), Request{Kind: KindSlidingLog, Burst: 100, Period: 60 * sec, Quantity: 1}, 580 * ms},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			if c.req.Kind != KindNone {
				if err := c.req.Validate(); err != nil {
					b.Fatal(err)
				}
			}
			apply := Apply
			if c.req.Kind == KindNone {
				apply = applyReference
			}
			req := c.req
			now := t0
			var st State
			limited := 0
			b.ReportAllocs()
			for b.Loop() {
				var res Result
				st, res = apply(st, &req, now)
				if res.Limited {
					limited++
				}
				if st.ExpireAt <= now {
					st = State{}
				}
				now += c.step
			}
			b.ReportMetric(float64(limited)/float64(b.N), "limited/op")
		})
	}
}

// applyReference has Apply's shape and does no limiter work.
//
//go:noinline
func applyReference(st State, req *Request, now int64) (State, Result) {
	st.ExpireAt = now + req.Period
	return st, Result{Limit: req.Burst, RetryAfter: -1}
}

// BenchmarkParseRequest answers: what does parsing a command's arguments
// cost? Reference: ParseInt of one number.
func BenchmarkParseRequest(b *testing.B) {
	opt := DefaultParseOptions()
	b.Run("reference-ParseInt", func(b *testing.B) {
		n := []byte("123456")
		b.ReportAllocs()
		for b.Loop() {
			_, _ = ParseInt(n)
		}
	})
	b.Run("CL.THROTTLE", func(b *testing.B) {
		a := args("15", "30", "60", "1")
		b.ReportAllocs()
		for b.Loop() {
			_, _ = ParseRequest(KindGCRA, a, opt)
		}
	})
	b.Run("TB.TAKE", func(b *testing.B) {
		a := args("100", "10", "500ms", "2", "INTERVAL")
		b.ReportAllocs()
		for b.Loop() {
			_, _ = ParseRequest(KindTokenBucket, a, opt)
		}
	})
}
