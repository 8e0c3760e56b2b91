package httplimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/httplimit"
)

// breakerClock is the breaker's fake clock.
type breakerClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *breakerClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *breakerClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestMiddlewareServerDown: with nothing listening and a go-redis client
// with its default options (which retries a refused dial in the
// background), the first request learns of the refusal at once and opens
// the breaker, and every later one makes no round trip: all answer in far
// less than the timeout, failed open or closed as configured.
func TestMiddlewareServerDown(t *testing.T) {
	const timeout = httplimit.DefaultTimeout
	for _, closed := range []bool{false, true} {
		name := "open"
		if closed {
			name = "closed"
		}
		t.Run(name, func(t *testing.T) {
			rdb := redis.NewClient(&redis.Options{Addr: deadAddr(t), ContextTimeoutEnabled: true})
			t.Cleanup(func() { rdb.Close() })
			var errs []error
			opts := []httplimit.Option{httplimit.WithErrorHandler(func(_ *http.Request, err error) { errs = append(errs, err) })}
			if closed {
				opts = append(opts, httplimit.WithFailClosed())
			}
			mw, err := httplimit.Middleware(rdb, []httplimit.Policy{{Name: "p", Burst: 9, Count: 10, Period: time.Second}}, httplimit.ByIP(), opts...)
			if err != nil {
				t.Fatal(err)
			}
			next := &okHandler{}
			h := mw(next)
			const requests = 200
			var first, rest, slowest time.Duration // the first request; the others' total and slowest
			for i := range requests {
				start := time.Now()
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
				took := time.Since(start)
				if i == 0 {
					first = took
				} else {
					rest += took
					slowest = max(slowest, took)
				}
				want := http.StatusOK
				if closed {
					want = http.StatusServiceUnavailable
				}
				if rec.Code != want {
					t.Fatalf("request %d: status %d, want %d", i+1, rec.Code, want)
				}
			}
			others := requests - 1
			t.Logf("the first request %v; the other %d: %v in all, slowest %v (timeout %v)", first, others, rest, slowest, timeout)
			// Generous bounds for a loaded machine: a refused loopback
			// dial takes well under a millisecond, and a round trip each
			// would cost the other requests others × timeout together.
			if first >= timeout/2 {
				t.Errorf("the first request took %v with a %v timeout, want the refusal at once", first, timeout)
			}
			if avg := rest / time.Duration(others); avg > timeout/10 {
				t.Errorf("the %d requests after the breaker opened took %v each on average, want no round trip (timeout %v)", others, avg, timeout)
			}
			if len(errs) != requests {
				t.Fatalf("error handler saw %d errors, want %d", len(errs), requests)
			}
			for i, err := range errs {
				if open := errors.Is(err, httplimit.ErrCircuitOpen); open != (i >= 1) {
					t.Fatalf("error %d = %v; want the refusal, then ErrCircuitOpen from request 2 on", i+1, err)
				}
			}
			wantCalls := requests
			if closed {
				wantCalls = 0
			}
			if got := next.Calls(); got != wantCalls {
				t.Errorf("next handler ran %d times, want %d", got, wantCalls)
			}
		})
	}
}

// TestLimiterBreaker: a server that stops answering (not refused) opens
// the breaker after N timeouts, not before; after the cool-down one probe
// goes to the server; a server back on the address closes the breaker at
// the first probe and decisions resume. The breaker's clock is fake.
func TestLimiterBreaker(t *testing.T) {
	const failures, coolDown, timeout = 3, 30 * time.Second, 50 * time.Millisecond
	cs := startServer(t)
	slow := startStallProxy(t, cs.Addr)
	clock := &breakerClock{t: time.Unix(1_700_000_000, 0)}
	policies := []httplimit.Policy{{Name: "p", Burst: 99, Count: 100, Period: time.Second}}
	newLimiter := func(addr string) *httplimit.Limiter {
		l, err := httplimit.NewLimiter(newClient(t, addr, true), policies, httplimit.WithTimeout(timeout),
			httplimit.WithCircuitBreaker(failures, coolDown), httplimit.WithClock(clock.Now))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	ctx := context.Background()

	l := newLimiter(slow)
	for i := range failures {
		if _, err := l.Allow(ctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("decision %d through a stalled server: %v, want the deadline", i+1, err)
		}
	}
	for i := range 3 {
		start := time.Now()
		if _, err := l.Allow(ctx, "k"); !errors.Is(err, httplimit.ErrCircuitOpen) {
			t.Fatalf("decision %d after %d timeouts: %v, want ErrCircuitOpen", failures+i+1, failures, err)
		}
		if took := time.Since(start); took >= timeout {
			t.Errorf("an open breaker's decision took %v (timeout %v)", took, timeout)
		}
	}
	clock.Advance(coolDown - time.Nanosecond)
	if _, err := l.Allow(ctx, "k"); !errors.Is(err, httplimit.ErrCircuitOpen) {
		t.Fatalf("decision just before the cool-down ends: %v, want ErrCircuitOpen", err)
	}
	clock.Advance(time.Nanosecond)
	if _, err := l.Allow(ctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the probe after the cool-down: %v, want it to reach the stalled server", err)
	}
	if _, err := l.Allow(ctx, "k"); !errors.Is(err, httplimit.ErrCircuitOpen) {
		t.Fatalf("decision after a failed probe: %v, want ErrCircuitOpen", err)
	}

	// Down, then back on the same address. This client reports a refused
	// connection at once (one dial, no retry): the breaker opens at the
	// first refusal.
	addr := deadAddr(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	l, err := httplimit.NewLimiter(rdb, policies, httplimit.WithTimeout(10*time.Second),
		httplimit.WithCircuitBreaker(failures, coolDown), httplimit.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Allow(ctx, "k"); err == nil || errors.Is(err, httplimit.ErrCircuitOpen) {
		t.Fatalf("first decision with the server down: %v, want a connection error", err)
	}
	if _, err := l.Allow(ctx, "k"); !errors.Is(err, httplimit.ErrCircuitOpen) {
		t.Fatalf("decision after a refused connection: %v, want ErrCircuitOpen", err)
	}
	startServerAt(t, addr)
	if _, err := l.Allow(ctx, "k"); !errors.Is(err, httplimit.ErrCircuitOpen) {
		t.Fatalf("decision with the server back but the cool-down running: %v, want ErrCircuitOpen", err)
	}
	clock.Advance(coolDown)
	for i := range 3 {
		d, err := l.Allow(ctx, "k")
		if err != nil || !d.Allowed || d.Results[0].Remaining != int64(99-i) {
			t.Fatalf("decision %d once the server is back: %+v, %v; want allowed with %d remaining", i+1, d, err, 99-i)
		}
	}
}

func TestBreakerOptions(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { rdb.Close() })
	policies := []httplimit.Policy{{Name: "p", Count: 1, Period: time.Second}}
	for _, o := range []httplimit.Option{
		httplimit.WithCircuitBreaker(0, time.Second),
		httplimit.WithCircuitBreaker(-1, time.Second),
		httplimit.WithCircuitBreaker(3, 0),
	} {
		if _, err := httplimit.NewLimiter(rdb, policies, o); !errors.Is(err, httplimit.ErrInvalidOption) {
			t.Errorf("NewLimiter with a bad breaker = %v, want ErrInvalidOption", err)
		}
	}
	// Without the breaker, every decision tries the server.
	down := redis.NewClient(&redis.Options{Addr: deadAddr(t), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { down.Close() })
	l, err := httplimit.NewLimiter(down, policies, httplimit.WithoutCircuitBreaker())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := l.Allow(context.Background(), "k"); err == nil || errors.Is(err, httplimit.ErrCircuitOpen) {
			t.Fatalf("decision %d without a breaker: %v, want a connection error", i+1, err)
		}
	}
}

// TestBreakerOpensAtOnceWhenRefused: docs/http.md says the breaker opens
// at once when the server's port refuses the connection. With a go-redis
// client of default options (it retries a refused dial, 100 ms apart, in
// the background), the first decision must come back with the refusal
// well within the 100 ms timeout, not at the deadline, and the next one
// must fail at once with ErrCircuitOpen, for a *redis.Client and a
// *redis.ClusterClient alike.
func TestBreakerOpensAtOnceWhenRefused(t *testing.T) {
	const bound = 50 * time.Millisecond // a refused loopback dial takes well under 1 ms
	for _, tc := range []struct {
		name   string
		client func(addr string) redis.UniversalClient
	}{
		{"client", func(addr string) redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		}},
		{"client without context timeout", func(addr string) redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: addr})
		}},
		{"cluster client", func(addr string) redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, ContextTimeoutEnabled: true})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb := tc.client(deadAddr(t))
			t.Cleanup(func() { rdb.Close() })
			l, err := httplimit.NewLimiter(rdb, []httplimit.Policy{{Name: "p", Burst: 9, Count: 10, Period: time.Second}})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = l.Allow(context.Background(), "k")
			took := time.Since(start)
			if err == nil || errors.Is(err, httplimit.ErrCircuitOpen) {
				t.Fatalf("first decision against a closed port: %v, want the refusal", err)
			}
			if took > bound {
				t.Errorf("first decision against a closed port took %v (%v), want the refusal within %v, not the %v timeout",
					took, err, bound, httplimit.DefaultTimeout)
			}
			start = time.Now()
			if _, err := l.Allow(context.Background(), "k"); !errors.Is(err, httplimit.ErrCircuitOpen) {
				t.Errorf("second decision: %v, want ErrCircuitOpen: the breaker opens at once on a refused connection", err)
			}
			if took := time.Since(start); took > bound {
				t.Errorf("second decision took %v, want at once", took)
			}
		})
	}
}
