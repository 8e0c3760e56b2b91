package httplimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cellserver/cellserver/httplimit"
)

// WithWait: a request the server would admit within the wait is answered
// allowed at its turn instead of refused; one that could not be is refused
// at once, and the deny cache never refuses one a wait would admit.
// The token bucket and the sliding log (a window limiter), each admitting
// one request per 300 ms, and two GCRA policies decided together by one
// CL.THROTTLEALL (one per second) alike.
func TestLimiterWait(t *testing.T) {
	for _, policy := range [][]httplimit.Policy{
		{{Name: "tb", Algorithm: httplimit.TokenBucket, Burst: 1, Count: 1, Period: 300 * time.Millisecond}},
		{{Name: "sl", Algorithm: httplimit.SlidingLog, Count: 1, Period: 300 * time.Millisecond}},
		// Two policies (GCRA periods are whole seconds: a turn 1 s away, within
		// the 1 s wait): one CL.THROTTLEALL … WAIT, both admitted at one turn.
		{{Name: "all", Count: 1, Period: time.Second}, {Name: "all-b", Count: 2, Period: 2 * time.Second}},
	} {
		t.Run(policy[0].Name, func(t *testing.T) { testLimiterWait(t, policy) })
	}
}

func testLimiterWait(t *testing.T, policy []httplimit.Policy) {
	cs := startServer(t)
	rdb := newClient(t, cs.Addr, false)
	waiting, err := httplimit.NewLimiter(rdb, policy, httplimit.WithWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	short, err := httplimit.NewLimiter(rdb, policy, httplimit.WithWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if d, err := waiting.Allow(ctx, "k"); err != nil || !d.Allowed {
		t.Fatalf("first = %+v, %v; want allowed", d, err)
	}
	// The unit is taken: the next comes one period later (the server's
	// clock is a fake that does not move, so its turn is that much real
	// time away).
	if d, err := short.Allow(ctx, "k"); err != nil || d.Allowed {
		t.Fatalf("with a 50ms wait = %+v, %v; want refused at once", d, err)
	}
	start := time.Now()
	if d, err := waiting.Allow(ctx, "k"); err != nil || !d.Allowed {
		t.Fatalf("with a 1s wait = %+v, %v; want allowed at its turn", d, err)
	}
	if e := time.Since(start); e < 200*time.Millisecond {
		t.Errorf("the waiting request was answered after %v, want at its turn (one period)", e)
	}

	// The middleware: the handler runs late rather than a 429.
	mw, err := waiting.Middleware(func(r *http.Request) (string, bool) { return "m", true })
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	for i := range 2 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if rec.Code != http.StatusNoContent {
			t.Fatalf("request %d: status %d, want 204 (the second waits for its turn)", i+1, rec.Code)
		}
	}
}

func TestWithWaitInvalid(t *testing.T) {
	rdb := newClient(t, deadAddr(t), false)
	for _, tc := range []struct {
		name     string
		policies []httplimit.Policy
		wait     time.Duration
	}{
		{"negative", []httplimit.Policy{{Name: "a", Count: 1, Period: time.Second}}, -time.Second},
		{"too long", []httplimit.Policy{{Name: "a", Count: 1, Period: time.Second}}, httplimit.MaxWait + time.Second},
	} {
		if _, err := httplimit.NewLimiter(rdb, tc.policies, httplimit.WithWait(tc.wait)); !errors.Is(err, httplimit.ErrInvalidOption) {
			t.Errorf("%s: NewLimiter = %v, want ErrInvalidOption", tc.name, err)
		}
	}
}
