package httplimit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/httplimit"
	"github.com/cellserver/cellserver/internal/poll"
)

// waitingOn reads how many acquires wait in key's line (CL.INSPECT's
// waiting field; absent: none).
func waitingOn(ctx context.Context, c *redis.Client, key string) (int, error) {
	v, err := c.Do(ctx, "CL.INSPECT", key).Result()
	if err != nil {
		if errors.Is(err, redis.Nil) {
			return 0, nil
		}
		return 0, err
	}
	var w any
	switch m := v.(type) {
	case map[any]any:
		w = m["waiting"]
	case []any:
		for i := 0; i+1 < len(m); i += 2 {
			if m[i] == "waiting" {
				w = m[i+1]
			}
		}
	default:
		return 0, fmt.Errorf("CL.INSPECT %s answered %T", key, v)
	}
	if w == nil {
		return 0, nil
	}
	l, ok := w.([]any)
	if !ok {
		return 0, fmt.Errorf("CL.INSPECT %s: waiting is %T", key, w)
	}
	return len(l), nil
}

// TestConcurrencyMiddlewareWait: with WithWait, a request that finds the
// only unit held waits for its release and is served (200) instead of a
// 429, while one without the option gets its 429 at once; a request whose
// context is cancelled while it waits gives its place up (503, its handler
// not run), so the unit the holder frees goes to the next request rather
// than to nobody.
func TestConcurrencyMiddlewareWait(t *testing.T) {
	cs := startServer(t)
	c := newClient(t, cs.Addr, true)
	const key = "jobs:{u1}"
	policy := httplimit.ConcurrencyPolicy{Name: "jobs", Max: 1}
	var ended atomic.Int32
	waiting, err := httplimit.ConcurrencyMiddleware(c, policy, headerUser, httplimit.WithWait(2*time.Second),
		httplimit.WithErrorHandler(func(r *http.Request, err error) {
			if errors.Is(err, httplimit.ErrRequestEnded) {
				ended.Add(1)
			} else {
				t.Errorf("error handler: %v", err)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	refusing, err := httplimit.ConcurrencyMiddleware(c, policy, headerUser)
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan string), make(chan struct{})
	var served atomic.Int32
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		if r.URL.Query().Get("do") == "block" {
			entered <- r.URL.Query().Get("n")
			<-release
		}
		w.WriteHeader(http.StatusOK)
	})
	hw, hr := waiting(handler), refusing(handler)
	serve := func(ctx context.Context, h http.Handler, target string) <-chan *httptest.ResponseRecorder {
		done := make(chan *httptest.ResponseRecorder, 1)
		go func() {
			req := httptest.NewRequest(http.MethodGet, target, nil).WithContext(ctx)
			req.Header.Set("X-User", "u1")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			done <- rec
		}()
		return done
	}
	inLine := func(want int) {
		t.Helper()
		poll.Until(t, 10*time.Second, func() error {
			n, err := waitingOn(t.Context(), c, key)
			if err == nil && n != want {
				err = fmt.Errorf("%d waiting in %s's line, want %d", n, key, want)
			}
			return err
		})
	}

	// The first holds the only unit.
	first := serve(t.Context(), hw, "/?do=block&n=1")
	if n := <-entered; n != "1" {
		t.Fatalf("entered: %s, want the first", n)
	}
	// Without the option: 429 at once.
	if rec := <-serve(t.Context(), hr, "/"); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("without WithWait while the unit is held: status %d, want 429", rec.Code)
	}
	// With it: waits in line, and runs when the first returns.
	second := serve(t.Context(), hw, "/?do=block&n=2")
	inLine(1)
	select {
	case rec := <-second:
		t.Fatalf("the waiting request was answered %d before the unit was released", rec.Code)
	case n := <-entered:
		t.Fatalf("request %s entered its handler before the unit was released", n)
	default:
	}
	release <- struct{}{}
	if rec := <-first; rec.Code != http.StatusOK {
		t.Fatalf("first: status %d, want 200", rec.Code)
	}
	if n := <-entered; n != "2" {
		t.Fatalf("entered: %s, want the waiting second", n)
	}
	// The second holds the unit now; a third waits and its client gives up.
	ctx, cancel := context.WithCancel(t.Context())
	third := serve(ctx, hw, "/?n=3")
	inLine(1)
	before := served.Load()
	cancel()
	rec := <-third
	if rec.Code != http.StatusServiceUnavailable || served.Load() != before || ended.Load() != 1 {
		t.Fatalf("cancelled while waiting: status %d, handlers run %d, ErrRequestEnded seen %d times; want 503, none, once",
			rec.Code, served.Load()-before, ended.Load())
	}
	if n, err := waitingOn(t.Context(), c, key); err != nil || n != 0 {
		t.Fatalf("after the cancelled request returned: %d waiting, %v; want its place given up", n, err)
	}
	release <- struct{}{}
	if rec := <-second; rec.Code != http.StatusOK {
		t.Fatalf("second: status %d, want 200", rec.Code)
	}
	// The unit went to nobody: a request without the option gets it at once.
	if rec := <-serve(t.Context(), hr, "/"); rec.Code != http.StatusOK {
		t.Fatalf("after the holder returned, the cancelled waiter gone: status %d, want 200 (no unit leaked)", rec.Code)
	}
	if held, err := c.Exists(t.Context(), key).Result(); err != nil || held != 0 {
		t.Fatalf("EXISTS %s after every handler returned = %d, %v; want 0 (nothing held, nobody waiting)", key, held, err)
	}
}

// A waiting acquire never outlasts its request's deadline: WAIT is cut to
// the time left less the timeout, so the 429 comes before the deadline.
func TestConcurrencyMiddlewareWaitDeadline(t *testing.T) {
	cs := startServer(t)
	c := newClient(t, cs.Addr, true)
	mw, err := httplimit.ConcurrencyMiddleware(c, httplimit.ConcurrencyPolicy{Name: "jobs", Max: 1}, headerUser,
		httplimit.WithWait(time.Minute), httplimit.WithTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(t.Context(), "CC.ACQUIRE", "jobs:{u1}", 1, "60s", "ID", "holder").Result(); err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("handler ran without a unit") }))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	req := httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx)
	req.Header.Set("X-User", "u1")
	rec := httptest.NewRecorder()
	start := time.Now()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusTooManyRequests || ctx.Err() != nil {
		t.Fatalf("status %d after %v (context: %v); want 429 before the request's deadline", rec.Code, time.Since(start), ctx.Err())
	}
	if e := time.Since(start); e < time.Second {
		t.Errorf("answered after %v; want it to have waited about 1.5s (the deadline less the timeout)", e)
	}
}
