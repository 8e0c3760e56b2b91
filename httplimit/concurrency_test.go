package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/httplimit"
	"github.com/cellserver/cellserver/internal/poll"
)

// headerUser keys requests by their X-User header.
func headerUser(r *http.Request) (string, bool) {
	u := r.Header.Get("X-User")
	return u, u != ""
}

func get(h http.Handler, user string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set("X-User", user)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// cmdCalls reads a command's calls from INFO commandstats.
func cmdCalls(t *testing.T, c *redis.Client, cmd string) int {
	t.Helper()
	info, err := c.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	m := regexp.MustCompile(`cmdstat_` + regexp.QuoteMeta(cmd) + `:calls=(\d+)`).FindStringSubmatch(info)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestConcurrencyMiddleware: two requests of max 2 in flight, the third
// refused with 429, Retry-After and the concurrent-requests fields; a
// handler's return frees its unit; a panicking handler's too.
func TestConcurrencyMiddleware(t *testing.T) {
	cs := startServer(t)
	c := newClient(t, cs.Addr, true)
	mw, err := httplimit.ConcurrencyMiddleware(c, httplimit.ConcurrencyPolicy{Name: "streams", Max: 2, TTL: 0}, headerUser)
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{})
	release := make(chan struct{})
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("do") {
		case "panic":
			panic("handler failed")
		case "block":
			entered <- struct{}{}
			<-release
		}
		w.WriteHeader(http.StatusOK)
	}))
	blocked := make(chan *httptest.ResponseRecorder, 2)
	for range 2 {
		go func() {
			req := httptest.NewRequest(http.MethodGet, "/?do=block", nil)
			req.Header.Set("X-User", "u1")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			blocked <- rec
		}()
		<-entered
	}
	third := get(h, "u1")
	if third.Code != http.StatusTooManyRequests {
		t.Fatalf("third request in flight: status %d, want 429", third.Code)
	}
	for field, want := range map[string]string{
		"RateLimit-Policy": `"streams";q=2;qu="concurrent-requests"`,
		"RateLimit":        `"streams";r=0;t=60`,
		"Retry-After":      "60",
	} {
		if got := third.Header().Get(field); got != want {
			t.Errorf("refused: %s = %q, want %q", field, got, want)
		}
	}
	if rec := get(h, "u2"); rec.Code != http.StatusOK || rec.Header().Get("RateLimit") != `"streams";r=1` {
		t.Errorf("another key: %d %q, want 200 with r=1", rec.Code, rec.Header().Get("RateLimit"))
	}
	release <- struct{}{}
	if rec := <-blocked; rec.Code != http.StatusOK || rec.Header().Get("RateLimit") == "" {
		t.Fatalf("blocked request: %d, fields %v", rec.Code, rec.Header())
	}
	if rec := get(h, "u1"); rec.Code != http.StatusOK {
		t.Fatalf("after a handler returned: status %d, want 200 (its unit freed)", rec.Code)
	}
	// A panicking handler frees its unit too (the panic goes on).
	func() {
		defer func() {
			if p := recover(); p != "handler failed" {
				t.Fatalf("recovered %v, want the handler's panic", p)
			}
		}()
		req := httptest.NewRequest(http.MethodGet, "/?do=panic", nil)
		req.Header.Set("X-User", "u1")
		h.ServeHTTP(httptest.NewRecorder(), req)
	}()
	if rec := get(h, "u1"); rec.Code != http.StatusOK {
		t.Fatalf("after a panicking handler: status %d, want 200 (its unit freed)", rec.Code)
	}
	release <- struct{}{}
	<-blocked
	held, err := c.Exists(t.Context(), "streams:{u1}").Result()
	if err != nil || held != 0 {
		t.Fatalf("EXISTS streams:{u1} after every handler returned = %d, %v; want 0 (nothing held)", held, err)
	}
}

// TestConcurrencyMiddlewareRenews: with a TTL, a handler that runs past
// it keeps its lease (renewed every TTL/2); without renewals it would
// have expired and let a second request in.
func TestConcurrencyMiddlewareRenews(t *testing.T) {
	cs := startServer(t)
	c := newClient(t, cs.Addr, true)
	const ttl = 100 * time.Millisecond
	mw, err := httplimit.ConcurrencyMiddleware(c, httplimit.ConcurrencyPolicy{Name: "jobs", Max: 1, TTL: ttl}, headerUser)
	if err != nil {
		t.Fatal(err)
	}
	var inner http.Handler
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("do") != "long" {
			return
		}
		// Three ttl's pass on the server's clock, each after a renewal
		// (every 50 ms of real time).
		for range 3 {
			before := cmdCalls(t, c, "cc.renew")
			poll.Until(t, 10*time.Second, func() error {
				if n := cmdCalls(t, c, "cc.renew"); n <= before {
					return fmt.Errorf("cc.renew calls %d, want more than %d", n, before)
				}
				return nil
			})
			cs.Clock.Advance(ttl * 3 / 4)
		}
		if rec := get(inner, "u"); rec.Code != http.StatusTooManyRequests {
			t.Errorf("second request while the long one runs: status %d, want 429 (its lease renewed)", rec.Code)
		}
	}))
	inner = h
	req := httptest.NewRequest(http.MethodGet, "/?do=long", nil)
	req.Header.Set("X-User", "u")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if rec := get(h, "u"); rec.Code != http.StatusOK {
		t.Fatalf("after the long request: status %d, want 200", rec.Code)
	}
}

// TestConcurrencyMiddlewareFailOpen: with the server gone, requests go on
// unlimited (the default) or get 503 (WithFailClosed).
func TestConcurrencyMiddlewareFailOpen(t *testing.T) {
	c := newClient(t, deadAddr(t), true)
	for _, tc := range []struct {
		opts []httplimit.Option
		want int
	}{
		{nil, http.StatusOK},
		{[]httplimit.Option{httplimit.WithFailClosed()}, http.StatusServiceUnavailable},
	} {
		mw, err := httplimit.ConcurrencyMiddleware(c, httplimit.ConcurrencyPolicy{Name: "p", Max: 1}, headerUser, tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		if rec := get(mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})), "u"); rec.Code != tc.want {
			t.Errorf("server down, %d options: status %d, want %d", len(tc.opts), rec.Code, tc.want)
		}
	}
	for _, p := range []httplimit.ConcurrencyPolicy{{Name: "", Max: 1}, {Name: "p", Max: 0}, {Name: "p", Max: 1, TTL: time.Microsecond}} {
		if _, err := httplimit.ConcurrencyMiddleware(c, p, headerUser); err == nil {
			t.Errorf("ConcurrencyMiddleware(%+v) = nil error, want ErrInvalidPolicy", p)
		}
	}
}
