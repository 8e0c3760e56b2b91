package httplimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/cellserver/cellserver/httplimit"
)

// examplePolicies are the example's: 20 at once and 10 per second; 10,000
// a day.
var examplePolicies = []httplimit.Policy{
	{Name: "burst", Burst: 19, Count: 10, Period: time.Second},
	{Name: "daily", Burst: 9999, Count: 10000, Period: 24 * time.Hour},
}

// TestLimiterDenyCache floods one key against a real server whose clock
// the limiter shares: after the server's first refusal, every request is
// refused locally with the server's fields until the refusal's
// retry_after passes, then the server decides again. The counters say so.
// An operator who deletes the key is obeyed once the cache's max passes.
func TestLimiterDenyCache(t *testing.T) {
	cs := startServer(t)
	rdb := newClient(t, cs.Addr, true)
	l, err := httplimit.NewLimiter(rdb, examplePolicies, httplimit.WithClock(cs.Clock.Time), httplimit.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	allow := func(what string) httplimit.Decision {
		t.Helper()
		d, err := l.Allow(ctx, "ip:192.0.2.1")
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return d
	}
	for i := range 20 {
		if d := allow("burst"); !d.Allowed {
			t.Fatalf("request %d refused: %+v", i+1, d)
		}
	}
	refused := allow("request 21")
	if refused.Allowed || refused.Results[0].RetryAfter != time.Second {
		t.Fatalf("request 21 = %+v, want refused by burst for 1 s", refused)
	}
	checkStats(t, l, httplimit.Stats{Decisions: 21, RoundTrips: 21})
	for range 100 {
		if d := allow("flood"); !reflect.DeepEqual(d, refused) {
			t.Fatalf("a local refusal = %+v, want the server's %+v", d, refused)
		}
	}
	checkStats(t, l, httplimit.Stats{Decisions: 121, Local: 100, RoundTrips: 21})
	cs.Clock.Advance(600 * time.Millisecond)
	d := allow("600 ms later")
	if d.Allowed || d.Results[0].RetryAfter != 400*time.Millisecond || d.Results[0].ResetAfter != 1400*time.Millisecond {
		t.Errorf("600 ms later = %+v, want the refusal with 400 ms to retry and 1.4 s to reset", d)
	}
	// Another quantity is not the cached refusal: it goes to the server.
	if _, err := l.AllowN(ctx, "ip:192.0.2.1", 0); err != nil {
		t.Fatal(err)
	}
	checkStats(t, l, httplimit.Stats{Decisions: 123, Local: 101, RoundTrips: 22})
	cs.Clock.Advance(400 * time.Millisecond)
	if d := allow("1 s later"); !d.Allowed {
		t.Errorf("once retry_after has passed = %+v, want allowed by the server", d)
	}
	checkStats(t, l, httplimit.Stats{Decisions: 124, Local: 101, RoundTrips: 23})

	// A refusal to retry in 2 s (20 at once twice) is held 1 s, the
	// cache's max, so an operator deleting the key is obeyed within it.
	const other = "ip:192.0.2.2"
	if d, err := l.AllowN(ctx, other, 20); err != nil || !d.Allowed {
		t.Fatalf("20 at once: %+v, %v", d, err)
	}
	if d, err := l.AllowN(ctx, other, 20); err != nil || d.Allowed || d.Results[0].RetryAfter != 2*time.Second {
		t.Fatalf("20 at once again: %+v, %v; want refused for 2 s", d, err)
	}
	if _, err := rdb.Del(ctx, l.ServerKey("burst", other)).Result(); err != nil {
		t.Fatal(err)
	}
	before := l.Stats()
	if d, err := l.AllowN(ctx, other, 20); err != nil || d.Allowed {
		t.Fatalf("just after the key was deleted: %+v, %v; want the cached refusal", d, err)
	}
	if got := l.Stats(); got.RoundTrips != before.RoundTrips || got.Local != before.Local+1 {
		t.Errorf("the cached refusal: Stats %+v, then %+v; want one more local and no round trip", before, got)
	}
	cs.Clock.Advance(httplimit.DefaultDenyCacheMax)
	// The server, with its key intact, would refuse 20 after 1 s.
	if d, err := l.AllowN(ctx, other, 20); err != nil || !d.Allowed {
		t.Errorf("the deny cache's max after the key was deleted: %+v, %v; want allowed", d, err)
	}
}

// TestLimiterDenyCacheOff: WithDenyCache(0) sends every decision to the
// server.
func TestLimiterDenyCacheOff(t *testing.T) {
	cs := startServer(t)
	l, err := httplimit.NewLimiter(newClient(t, cs.Addr, true), examplePolicies, httplimit.WithDenyCache(0), httplimit.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if _, err := l.Allow(context.Background(), "k"); err != nil {
			t.Fatal(err)
		}
	}
	checkStats(t, l, httplimit.Stats{Decisions: 50, RoundTrips: 50})
}

// TestLimiterStatsErrors: decisions that fail count as errors, those the
// open breaker fails without a round trip too.
func TestLimiterStatsErrors(t *testing.T) {
	l, err := httplimit.NewLimiter(newClient(t, deadAddr(t), true), examplePolicies, httplimit.WithCircuitBreaker(1, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := l.Allow(context.Background(), "k"); err == nil {
			t.Fatal("a decision against a closed port succeeded")
		}
	}
	checkStats(t, l, httplimit.Stats{Decisions: 3, RoundTrips: 1, Errors: 3})
}

func checkStats(t *testing.T, l *httplimit.Limiter, want httplimit.Stats) {
	t.Helper()
	if got := l.Stats(); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

// TestLimiterMiddleware: middleware over a Limiter the caller keeps, whose
// Stats count its requests; a Limiter's own options are refused there.
func TestLimiterMiddleware(t *testing.T) {
	cs := startServer(t)
	l, err := httplimit.NewLimiter(newClient(t, cs.Addr, true), examplePolicies, httplimit.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []httplimit.Option{httplimit.WithTimeout(time.Second), httplimit.WithKeyPrefix("a:"), httplimit.WithDenyCache(0),
		httplimit.WithCircuitBreaker(1, time.Second), httplimit.WithoutCircuitBreaker()} {
		if _, err := l.Middleware(httplimit.ByIP(), o); !errors.Is(err, httplimit.ErrInvalidOption) {
			t.Errorf("Limiter.Middleware with a limiter's option: %v, want ErrInvalidOption", err)
		}
	}
	mw, err := l.Middleware(httplimit.ByIP(), httplimit.WithLegacyHeaders())
	if err != nil {
		t.Fatal(err)
	}
	h := mw(&okHandler{})
	for i := range 22 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		want := http.StatusOK
		if i >= 20 {
			want = http.StatusTooManyRequests
		}
		if rec.Code != want || rec.Header().Get("X-RateLimit-Limit") != "20" {
			t.Fatalf("request %d: %d %v, want %d with the legacy fields", i+1, rec.Code, rec.Header(), want)
		}
	}
	checkStats(t, l, httplimit.Stats{Decisions: 22, Local: 1, RoundTrips: 21})
}
