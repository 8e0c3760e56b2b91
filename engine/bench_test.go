package engine

import "testing"

// hotKeyCase is one limiter driven on one hot key: req applied every step ns,
// after prefill calls at the same spacing. The same cases feed BenchmarkApply
// and TestApplyAllocs.
type hotKeyCase struct {
	name    string
	req     Request
	step    int64 // clock advance per request: about the sustained rate, so both outcomes occur
	prefill int   // calls made before measuring
}

var hotKeyCases = []hotKeyCase{
	{name: KindGCRA.String(), req: Request{Kind: KindGCRA, Burst: 15, Rate: 30, Period: 60 * sec, Quantity: 1}, step: 1900 * ms},
	{name: KindTokenBucket.String(), req: Request{Kind: KindTokenBucket, Burst: 100, Rate: 10, Period: sec, Quantity: 1}, step: 95 * ms},
	{name: KindTokenBucket.String() + "-interval", req: Request{Kind: KindTokenBucket, Burst: 100, Rate: 10, Period: sec, Quantity: 1, Interval: true}, step: 95 * ms},
	{name: KindLeakyBucket.String(), req: Request{Kind: KindLeakyBucket, Burst: 40, Rate: 2, Period: sec, Quantity: 1}, step: 480 * ms},
	{name: KindFixedWindow.String(), req: Request{Kind: KindFixedWindow, Burst: 5000, Period: 3600 * sec, Quantity: 1}, step: 700 * ms},
	{name: KindSlidingWindow.String(), req: Request{Kind: KindSlidingWindow, Burst: 100, Period: 60 * sec, Quantity: 1}, step: 580 * ms},
	// About 100 entries in the window: one leaves and one arrives per call.
	{name: KindSlidingLog.String(), req: Request{Kind: KindSlidingLog, Burst: 100, Period: 60 * sec, Quantity: 1}, step: 580 * ms},
	// A refusal on a full log of 1000 entries, the clock standing still: the
	// oldest entry frees the unit needed, so this is the cheapest refusal's
	// cost, not a scan of the log.
	{name: KindSlidingLog.String() + "-full", req: Request{Kind: KindSlidingLog, Burst: 1000, Period: sec, Quantity: 1}, step: 0, prefill: 1000},
}

// prefilled returns the state of c's key after its prefill calls, and the
// instant of the first measured call. Prefill calls are spaced ms/2 apart
// (a case with step 0 holds still after them).
func (c *hotKeyCase) prefilled() (State, int64) {
	var st State
	now := t0
	for range c.prefill {
		st, _ = Apply(st, &c.req, now)
		now += ms / 2
	}
	return stored(st, now), now
}

// BenchmarkApply answers: what does one limiter decision cost, per kind, on a
// hot key that is sometimes allowed and sometimes limited? The same body
// runs for every kind. "reference" is a call of the same shape that does no
// limiter work; quote each kind as a ratio to it (the machine is shared and
// noisy). Target: 0 allocs/op for every kind but the sliding log.
func BenchmarkApply(b *testing.B) {
	cases := append([]hotKeyCase{{name: "reference", req: Request{Kind: KindNone}, step: 1e6}}, hotKeyCases...)
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			apply := Apply
			if c.req.Kind == KindNone {
				apply = applyReference
			} else if err := c.req.Validate(); err != nil {
				b.Fatal(err)
			}
			req := c.req
			st, now := c.prefilled()
			limited := 0
			b.ReportAllocs()
			for b.Loop() {
				var res Result
				st, res = apply(st, &req, now)
				if res.Limited {
					limited++
				}
				st = stored(st, now)
				now += c.step
			}
			b.ReportMetric(float64(limited)/float64(b.N), "limited/op")
		})
	}
}

// applyReference has Apply's shape and does no limiter work. It returns a
// live state, so that the loop keeps it as it keeps a limiter's.
//
//go:noinline
func applyReference(st State, req *Request, now int64) (State, Result) {
	st.Kind, st.ExpireAt = KindGCRA, now+req.Period
	return st, Result{Limit: req.Burst, RetryAfter: -1}
}

// TestApplyAllocs holds the benchmark's allocation target as a test: on
// every hot-key case but the sliding log (whose log grows), a call
// allocates nothing, allowed or limited.
func TestApplyAllocs(t *testing.T) {
	for _, c := range hotKeyCases {
		if c.req.Kind == KindSlidingLog {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			req := c.req
			st, now := c.prefilled()
			var allowed, limited int
			allocs := testing.AllocsPerRun(6000, func() { // long enough for every case to reach its limit
				var res Result
				st, res = Apply(st, &req, now)
				if res.Limited {
					limited++
				} else {
					allowed++
				}
				st = stored(st, now)
				now += c.step
			})
			if allocs != 0 {
				t.Errorf("%v allocs per call, want 0", allocs)
			}
			if allowed == 0 || limited == 0 {
				t.Errorf("%d allowed, %d limited: the case does not reach both outcomes", allowed, limited)
			}
		})
	}
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
