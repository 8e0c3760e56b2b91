package httplimit_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/httplimit"
)

// absent marks a header that must not be in the response.
const absent = "<absent>"

// step is one request and what its response must be.
type step struct {
	advance time.Duration     // the server's clock moves this much first
	cost    string            // X-Cost, the request's quantity (1 when empty)
	status  int               // the response's status
	header  map[string]string // exact values, or absent
	body    string            // the exact body, when not empty
}

// costFromHeader reads the request's quantity from X-Cost (default 1).
func costFromHeader(r *http.Request) int64 {
	if v := r.Header.Get("X-Cost"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return -1
		}
		return n
	}
	return 1
}

// okHandler answers 200 "ok" and counts its calls.
type okHandler struct {
	mu    sync.Mutex
	calls int
}

func (h *okHandler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	h.mu.Lock()
	h.calls++
	h.mu.Unlock()
	_, _ = io.WriteString(w, "ok")
}

func (h *okHandler) Calls() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

func TestMiddlewareFields(t *testing.T) {
	const (
		quotaExceeded = `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota Exceeded","status":429,`
	)
	cases := []struct {
		name     string
		policies []httplimit.Policy
		opts     []httplimit.Option
		steps    []step
	}{
		{
			name:     "gcra as the README's CL.THROTTLE user:1 15 30 60",
			policies: []httplimit.Policy{{Name: "burst", Burst: 15, Count: 30, Period: time.Minute}},
			steps: []step{{status: 200, header: map[string]string{
				"RateLimit-Policy":  `"burst";q=16;w=32`,
				"RateLimit":         `"burst";r=15;t=2`,
				"X-RateLimit-Limit": absent, "Retry-After": absent,
			}}},
		},
		{
			name:     "gcra refused, legacy headers",
			policies: []httplimit.Policy{{Name: "strict", Burst: 1, Count: 1, Period: time.Minute}},
			opts:     []httplimit.Option{httplimit.WithLegacyHeaders()},
			steps: []step{
				{status: 200, header: map[string]string{
					"RateLimit-Policy": `"strict";q=2;w=120`, "RateLimit": `"strict";r=1;t=60`,
					"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "1", "X-RateLimit-Reset": "60", "Retry-After": absent,
				}},
				{status: 200, header: map[string]string{
					"RateLimit":         `"strict";r=0;t=120`,
					"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "120",
				}},
				{status: 429, header: map[string]string{
					"RateLimit-Policy": `"strict";q=2;w=120`, "RateLimit": `"strict";r=0;t=120`, "Retry-After": "60",
					"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "120",
					"Content-Type": "application/problem+json",
				}, body: quotaExceeded + `"detail":"Too many requests: retry in 60 s.","violated-policies":["strict"]}`},
				{cost: "5", status: 429, header: map[string]string{"RateLimit": `"strict";r=0;t=120`, "Retry-After": absent},
					body: quotaExceeded + `"detail":"The request is larger than the whole quota of a policy: it can never be allowed.","violated-policies":["strict"]}`},
				{advance: 60 * time.Second, status: 200, header: map[string]string{"RateLimit": `"strict";r=0;t=120`}},
			},
		},
		{
			name:     "token bucket, milliseconds rounded up",
			policies: []httplimit.Policy{{Name: "tokens", Algorithm: httplimit.TokenBucket, Burst: 10, Count: 1, Period: time.Second}},
			steps: []step{{cost: "3", status: 200, header: map[string]string{
				"RateLimit-Policy": `"tokens";q=10;w=10`, "RateLimit": `"tokens";r=7;t=3`,
			}}},
		},
		{
			name:     "token bucket with interval refills",
			policies: []httplimit.Policy{{Name: "tok4", Algorithm: httplimit.TokenBucketInterval, Burst: 4, Count: 4, Period: 4 * time.Second}},
			steps: []step{
				{cost: "4", status: 200, header: map[string]string{"RateLimit-Policy": `"tok4";q=4;w=4`, "RateLimit": `"tok4";r=0;t=4`}},
				{status: 429, header: map[string]string{"RateLimit": `"tok4";r=0;t=4`, "Retry-After": "4"}},
			},
		},
		{
			name:     "leaky bucket",
			policies: []httplimit.Policy{{Name: "queue", Algorithm: httplimit.LeakyBucket, Burst: 40, Count: 2, Period: time.Second}},
			steps:    []step{{status: 200, header: map[string]string{"RateLimit-Policy": `"queue";q=40;w=20`, "RateLimit": `"queue";r=39;t=1`}}},
		},
		{
			name:     "fixed window: t is the time to the window's end",
			policies: []httplimit.Policy{{Name: "hourly", Algorithm: httplimit.FixedWindow, Count: 5000, Period: time.Hour}},
			steps:    []step{{status: 200, header: map[string]string{"RateLimit-Policy": `"hourly";q=5000;w=3600`, "RateLimit": `"hourly";r=4999;t=2800`}}},
		},
		{
			name:     "sliding window",
			policies: []httplimit.Policy{{Name: "sw", Algorithm: httplimit.SlidingWindow, Count: 50, Period: time.Minute}},
			steps:    []step{{status: 200, header: map[string]string{"RateLimit-Policy": `"sw";q=50;w=60`, "RateLimit": `"sw";r=49;t=100`}}},
		},
		{
			name:     "sliding log",
			policies: []httplimit.Policy{{Name: "log", Algorithm: httplimit.SlidingLog, Count: 3, Period: 10 * time.Second}},
			steps: []step{
				{cost: "3", status: 200, header: map[string]string{"RateLimit-Policy": `"log";q=3;w=10`, "RateLimit": `"log";r=0;t=10`}},
				{advance: 2500 * time.Millisecond, status: 429, header: map[string]string{"RateLimit": `"log";r=0;t=8`, "Retry-After": "8"}},
			},
		},
		{
			name: "several policies in one CL.THROTTLEALL",
			policies: []httplimit.Policy{
				{Name: "second", Burst: 1, Count: 1, Period: time.Second},
				{Name: "minute", Burst: 9, Count: 10, Period: time.Minute},
			},
			opts: []httplimit.Option{httplimit.WithLegacyHeaders()},
			steps: []step{
				{status: 200, header: map[string]string{
					"RateLimit-Policy":  `"second";q=2;w=2, "minute";q=10;w=60`,
					"RateLimit":         `"second";r=1;t=1, "minute";r=9;t=6`,
					"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "1", "X-RateLimit-Reset": "1",
				}},
				{status: 200, header: map[string]string{"RateLimit": `"second";r=0;t=2, "minute";r=8;t=12`}},
				// Refused by "second": "minute" reports a peek and keeps its 8.
				{status: 429, header: map[string]string{
					"RateLimit": `"second";r=0;t=2, "minute";r=8;t=12`, "Retry-After": "1",
					"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "2",
				}, body: quotaExceeded + `"detail":"Too many requests: retry in 1 s.","violated-policies":["second"]}`},
				// One second on, both allow; "minute" goes from 8 to 7, not 6.
				{advance: time.Second, status: 200, header: map[string]string{"RateLimit": `"second";r=0;t=2, "minute";r=7;t=17`}},
			},
		},
		{
			name:     "legacy headers only",
			policies: []httplimit.Policy{{Name: "burst", Burst: 15, Count: 30, Period: time.Minute}},
			opts:     []httplimit.Option{httplimit.WithoutIETFHeaders(), httplimit.WithLegacyHeaders()},
			steps: []step{{status: 200, header: map[string]string{
				"RateLimit-Policy": absent, "RateLimit": absent,
				"X-RateLimit-Limit": "16", "X-RateLimit-Remaining": "15", "X-RateLimit-Reset": "2",
			}}},
		},
		{
			name:     "a peek consumes nothing",
			policies: []httplimit.Policy{{Name: "burst", Burst: 15, Count: 30, Period: time.Minute}},
			steps: []step{
				{cost: "0", status: 200, header: map[string]string{"RateLimit": `"burst";r=16;t=0`}},
				{status: 200, header: map[string]string{"RateLimit": `"burst";r=15;t=2`}},
				{cost: "0", status: 200, header: map[string]string{"RateLimit": `"burst";r=15;t=2`}},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := startServer(t)
			rdb := newClient(t, cs.Addr, true)
			// The deny cache reads the server's clock, so that a step
			// that advances it finds the cache as the server finds the key.
			opts := append([]httplimit.Option{httplimit.WithQuantity(costFromHeader), httplimit.WithFailClosed(),
				httplimit.WithTimeout(10 * time.Second), httplimit.WithClock(cs.Clock.Time)}, tc.opts...)
			mw, err := httplimit.Middleware(rdb, tc.policies, httplimit.ByIP(), opts...)
			if err != nil {
				t.Fatal(err)
			}
			next := &okHandler{}
			ts := httptest.NewServer(mw(next))
			defer ts.Close()
			allowed := 0
			for i, s := range tc.steps {
				cs.Clock.Advance(s.advance)
				req, err := http.NewRequest(http.MethodGet, ts.URL, nil)
				if err != nil {
					t.Fatal(err)
				}
				if s.cost != "" {
					req.Header.Set("X-Cost", s.cost)
				}
				res, err := ts.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != s.status {
					t.Fatalf("step %d: status = %d, want %d (body %s)", i+1, res.StatusCode, s.status, body)
				}
				if s.status == 200 {
					allowed++
				}
				for name, want := range s.header {
					got, ok := res.Header[http.CanonicalHeaderKey(name)]
					switch {
					case want == absent && ok:
						t.Errorf("step %d: %s = %q, want it absent", i+1, name, got)
					case want != absent && (len(got) != 1 || got[0] != want):
						t.Errorf("step %d: %s = %q, want %q", i+1, name, got, want)
					}
				}
				if s.body != "" && string(body) != s.body {
					t.Errorf("step %d: body = %s, want %s", i+1, body, s.body)
				}
				checkStructured(t, res.Header, tc.policies)
			}
			if got := next.Calls(); got != allowed {
				t.Errorf("next handler ran %d times, want %d", got, allowed)
			}
		})
	}
}

// checkStructured parses RateLimit-Policy and RateLimit, when present, as
// structured-field Lists: one Item per policy in order, a String naming
// it, Integer parameters (q, w; r, t), and the canonical serialization.
func checkStructured(t *testing.T, h http.Header, policies []httplimit.Policy) {
	t.Helper()
	for field, params := range map[string][]string{"RateLimit-Policy": {"q", "w"}, "RateLimit": {"r", "t"}} {
		values := h.Values(field)
		if len(values) == 0 {
			continue
		}
		list, err := httpsfv.UnmarshalList(values)
		if err != nil {
			t.Errorf("%s: %q does not parse as a structured-field List: %v", field, values, err)
			continue
		}
		if len(list) != len(policies) {
			t.Errorf("%s: %d members, want %d", field, len(list), len(policies))
			continue
		}
		for i, m := range list {
			item, ok := m.(httpsfv.Item)
			if !ok {
				t.Errorf("%s: member %d is %T, want an Item", field, i, m)
				continue
			}
			if name, ok := item.Value.(string); !ok || name != policies[i].Name {
				t.Errorf("%s: member %d value = %#v, want the String %q", field, i, item.Value, policies[i].Name)
			}
			if got := item.Params.Names(); strings.Join(got, ",") != strings.Join(params, ",") {
				t.Errorf("%s: member %d parameters = %v, want %v", field, i, got, params)
			}
			for _, p := range params {
				v, _ := item.Params.Get(p)
				if n, ok := v.(int64); !ok || n < 0 {
					t.Errorf("%s: member %d %s = %#v, want a non-negative Integer", field, i, p, v)
				}
			}
		}
		canonical, err := httpsfv.Marshal(list)
		if err != nil || canonical != strings.Join(values, ", ") {
			t.Errorf("%s: %q serializes back as %q (%v)", field, values, canonical, err)
		}
	}
}

// TestMiddlewareFailure fails open and closed with the server down and with
// a server that no longer answers, within the timeout.
func TestMiddlewareFailure(t *testing.T) {
	cs := startServer(t)
	slow := startStallProxy(t, cs.Addr)
	policies := []httplimit.Policy{
		{Name: "second", Burst: 4, Count: 5, Period: time.Second},
		{Name: "hour", Burst: 999, Count: 1000, Period: time.Hour},
	}
	const timeout = 100 * time.Millisecond
	for _, server := range []struct {
		name     string
		addr     string
		deadline bool // the error must be the deadline
	}{
		{"down", deadAddr(t), false},
		{"slow", slow, true},
	} {
		for _, closed := range []bool{false, true} {
			for _, contextTimeout := range []bool{false, true} {
				name := server.name + "/open"
				if closed {
					name = server.name + "/closed"
				}
				if contextTimeout {
					name += "/ContextTimeoutEnabled"
				}
				t.Run(name, func(t *testing.T) {
					rdb := newClient(t, server.addr, contextTimeout)
					var mu sync.Mutex
					var errs []error
					opts := []httplimit.Option{httplimit.WithTimeout(timeout), httplimit.WithErrorHandler(func(_ *http.Request, err error) {
						mu.Lock()
						defer mu.Unlock()
						errs = append(errs, err)
					})}
					if closed {
						opts = append(opts, httplimit.WithFailClosed())
					}
					mw, err := httplimit.Middleware(rdb, policies, httplimit.ByIP(), opts...)
					if err != nil {
						t.Fatal(err)
					}
					next := &okHandler{}
					h := mw(next)
					for i := range 3 {
						start := time.Now()
						rec := httptest.NewRecorder()
						h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
						// Generous for a loaded machine, yet well below the client's own
						// 3 s read timeout: the limiter's timeout is what stopped the call.
						if took := time.Since(start); took > 2*time.Second {
							t.Errorf("request %d took %v with a %v timeout", i+1, took, timeout)
						}
						want := http.StatusOK
						if closed {
							want = http.StatusServiceUnavailable
						}
						if rec.Code != want {
							t.Fatalf("request %d: status = %d, want %d", i+1, rec.Code, want)
						}
						for _, f := range []string{"RateLimit", "RateLimit-Policy", "Retry-After"} {
							if v := rec.Header().Get(f); v != "" {
								t.Errorf("request %d: %s = %q without a decision", i+1, f, v)
							}
						}
						if closed {
							const body = `{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"The rate limiter is unavailable."}`
							if rec.Body.String() != body || rec.Header().Get("Content-Type") != "application/problem+json" {
								t.Errorf("request %d: body %s (%s), want %s", i+1, rec.Body, rec.Header().Get("Content-Type"), body)
							}
						}
					}
					wantCalls := 3
					if closed {
						wantCalls = 0
					}
					if got := next.Calls(); got != wantCalls {
						t.Errorf("next handler ran %d times, want %d", got, wantCalls)
					}
					mu.Lock()
					defer mu.Unlock()
					if len(errs) != 3 {
						t.Fatalf("error handler saw %d errors, want 3", len(errs))
					}
					for _, err := range errs {
						if err == nil || server.deadline && !errors.Is(err, context.DeadlineExceeded) {
							t.Errorf("error %v, want an error (the deadline: %v)", err, server.deadline)
						}
					}
				})
			}
		}
	}
}

// TestMiddlewareHooks checks WithOnDecision, WithLimitedHandler, requests
// without a key, and a quantity out of range.
func TestMiddlewareHooks(t *testing.T) {
	cs := startServer(t)
	rdb := newClient(t, cs.Addr, true)
	var decisions []httplimit.Decision
	var errs []error
	mw, err := httplimit.Middleware(rdb,
		[]httplimit.Policy{{Name: "p", Burst: 0, Count: 1, Period: time.Minute}},
		httplimit.ByHeader("X-Api-Key"),
		httplimit.WithQuantity(costFromHeader),
		httplimit.WithOnDecision(func(_ *http.Request, d httplimit.Decision) { decisions = append(decisions, d) }),
		httplimit.WithErrorHandler(func(_ *http.Request, err error) { errs = append(errs, err) }),
		httplimit.WithLimitedHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusTeapot)
			_, _ = io.WriteString(w, "slow down")
		})),
		httplimit.WithTimeout(10*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}
	h := mw(&okHandler{})
	do := func(key, cost string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if key != "" {
			r.Header.Set("X-Api-Key", key)
		}
		if cost != "" {
			r.Header.Set("X-Cost", cost)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	for i, s := range []struct {
		key, cost string
		status    int
		retry     string
		decisions int
		errs      int
	}{
		{key: "", status: 200},                                      // no key: not limited
		{key: "", status: 200},                                      // still not
		{key: "k1", status: 200, decisions: 1},                      // allowed
		{key: "k1", status: 418, retry: "60", decisions: 2},         // refused: the limited handler answers
		{key: "k2", cost: "-1", status: 200, decisions: 2, errs: 1}, // bad quantity: fails open
		{key: "k2", cost: "2000000000000", status: 200, decisions: 2, errs: 2},
	} {
		rec := do(s.key, s.cost)
		if rec.Code != s.status || rec.Header().Get("Retry-After") != s.retry {
			t.Errorf("request %d: status %d, Retry-After %q; want %d, %q", i+1, rec.Code, rec.Header().Get("Retry-After"), s.status, s.retry)
		}
		if len(decisions) != s.decisions || len(errs) != s.errs {
			t.Fatalf("request %d: %d decisions, %d errors; want %d, %d", i+1, len(decisions), len(errs), s.decisions, s.errs)
		}
	}
	if got := decisions[1]; got.Allowed || len(got.Results) != 1 || !got.Results[0].Limited || got.Results[0].RetryAfter != time.Minute {
		t.Errorf("refused decision = %+v", got)
	}
	for _, err := range errs {
		if !errors.Is(err, httplimit.ErrInvalidQuantity) {
			t.Errorf("error %v, want ErrInvalidQuantity", err)
		}
	}
}

// TestMiddlewareServerError fails a request whose key holds another kind of
// limiter (WRONGTYPE): an error reply is no decision.
func TestMiddlewareServerError(t *testing.T) {
	cs := startServer(t)
	rdb := newClient(t, cs.Addr, true)
	policy := httplimit.Policy{Name: "p", Burst: 1, Count: 1, Period: time.Minute}
	l, err := httplimit.NewLimiter(rdb, []httplimit.Policy{policy}, httplimit.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := rdb.Do(ctx, "TB.TAKE", l.ServerKey("p", "ip:192.0.2.1"), 1, 1, "1s").Err(); err != nil {
		t.Fatal(err)
	}
	var failure error
	mw, err := httplimit.Middleware(rdb, []httplimit.Policy{policy}, httplimit.ByIP(), httplimit.WithFailClosed(),
		httplimit.WithTimeout(10*time.Second), httplimit.WithErrorHandler(func(_ *http.Request, err error) { failure = err }))
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	mw(&okHandler{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil)) // RemoteAddr 192.0.2.1:1234
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("status = %d, want 503", rec.Code)
	}
	_, err = l.Allow(ctx, "ip:192.0.2.1")
	for _, err := range []error{failure, err} {
		var rerr redis.Error
		if !errors.As(err, &rerr) || !strings.HasPrefix(rerr.Error(), "WRONGTYPE") {
			t.Errorf("error = %v, want the WRONGTYPE error", err)
		}
	}
}
