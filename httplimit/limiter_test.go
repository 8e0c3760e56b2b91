package httplimit_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/httplimit"
)

func TestLimiterAllow(t *testing.T) {
	cs := startServer(t)
	rdb := newClient(t, cs.Addr, false)
	l, err := httplimit.NewLimiter(rdb, []httplimit.Policy{
		{Name: "second", Burst: 1, Count: 1, Period: time.Second},
		{Name: "minute", Burst: 9, Count: 10, Period: time.Minute},
	}, httplimit.WithKeyPrefix("app:"), httplimit.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	type want struct {
		allowed  bool
		results  []httplimit.Result
		retry    time.Duration
		retryOK  bool
		binding  int
		violated []string
	}
	for i, s := range []struct {
		n    int64
		want want
	}{
		{1, want{allowed: true, binding: 0, results: []httplimit.Result{
			{Policy: "second", Limit: 2, Remaining: 1, RetryAfter: -1, ResetAfter: time.Second},
			{Policy: "minute", Limit: 10, Remaining: 9, RetryAfter: -1, ResetAfter: 6 * time.Second},
		}}},
		{1, want{allowed: true, binding: 0, results: []httplimit.Result{
			{Policy: "second", Limit: 2, Remaining: 0, RetryAfter: -1, ResetAfter: 2 * time.Second},
			{Policy: "minute", Limit: 10, Remaining: 8, RetryAfter: -1, ResetAfter: 12 * time.Second},
		}}},
		{1, want{retry: time.Second, retryOK: true, binding: 0, violated: []string{"second"}, results: []httplimit.Result{
			{Policy: "second", Limited: true, Limit: 2, Remaining: 0, RetryAfter: time.Second, ResetAfter: 2 * time.Second},
			{Policy: "minute", Limit: 10, Remaining: 8, RetryAfter: -1, ResetAfter: 12 * time.Second},
		}}},
		// More than "second" could ever give: no Retry-After.
		{3, want{binding: 0, violated: []string{"second"}, results: []httplimit.Result{
			{Policy: "second", Limited: true, Limit: 2, Remaining: 0, RetryAfter: -1, ResetAfter: 2 * time.Second},
			{Policy: "minute", Limit: 10, Remaining: 8, RetryAfter: -1, ResetAfter: 12 * time.Second},
		}}},
	} {
		d, err := l.AllowN(ctx, "user:42", s.n)
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		retry, retryOK := d.RetryAfter()
		got := want{allowed: d.Allowed, results: d.Results, retry: retry, retryOK: retryOK, binding: d.Binding(), violated: d.Violated()}
		if !reflect.DeepEqual(got, s.want) {
			t.Errorf("request %d: AllowN = %+v,\nwant %+v", i+1, got, s.want)
		}
	}
	// The keys are where the documentation says.
	for _, name := range []string{"second", "minute"} {
		key := l.ServerKey(name, "user:42")
		if want := "app:" + name + ":{user:42}"; key != want {
			t.Errorf("ServerKey(%q) = %q, want %q", name, key, want)
		}
		if n, err := rdb.Exists(ctx, key).Result(); err != nil || n != 1 {
			t.Errorf("EXISTS %s = %d, %v; want 1", key, n, err)
		}
	}
}

func TestDecisionBinding(t *testing.T) {
	r := func(limited bool, remaining int64, retry, reset time.Duration) httplimit.Result {
		return httplimit.Result{Limited: limited, Limit: 10, Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
	}
	for _, tc := range []struct {
		name    string
		d       httplimit.Decision
		binding int
		retry   time.Duration
		retryOK bool
	}{
		{"none", httplimit.Decision{Allowed: true}, -1, 0, false},
		{"fewest remaining", httplimit.Decision{Allowed: true, Results: []httplimit.Result{r(false, 5, -1, time.Second), r(false, 2, -1, time.Second), r(false, 3, -1, time.Hour)}}, 1, 0, false},
		{"remaining tie: longest reset", httplimit.Decision{Allowed: true, Results: []httplimit.Result{r(false, 2, -1, time.Second), r(false, 2, -1, time.Hour)}}, 1, 0, false},
		{"full tie: first", httplimit.Decision{Allowed: true, Results: []httplimit.Result{r(false, 2, -1, time.Hour), r(false, 2, -1, time.Hour)}}, 0, 0, false},
		{"refused: longest retry", httplimit.Decision{Results: []httplimit.Result{r(false, 0, -1, time.Hour), r(true, 0, time.Second, time.Second), r(true, 0, time.Minute, time.Minute)}}, 2, time.Minute, true},
		{"refused: never wins", httplimit.Decision{Results: []httplimit.Result{r(true, 0, time.Minute, time.Minute), r(true, 0, -1, time.Second), r(true, 0, time.Hour, time.Hour)}}, 1, 0, false},
	} {
		retry, ok := tc.d.RetryAfter()
		if got := tc.d.Binding(); got != tc.binding || retry != tc.retry || ok != tc.retryOK {
			t.Errorf("%s: Binding, RetryAfter = %d, %v, %v; want %d, %v, %v", tc.name, got, retry, ok, tc.binding, tc.retry, tc.retryOK)
		}
	}
}

// TestLimiterKeys decides keys a client chooses freely: braces, '=', long
// and empty keys keep every policy's key on one hash tag, and distinct keys
// stay distinct.
func TestLimiterKeys(t *testing.T) {
	cs := startServer(t)
	rdb := newClient(t, cs.Addr, true)
	l, err := httplimit.NewLimiter(rdb, []httplimit.Policy{
		{Name: "a", Burst: 0, Count: 1, Period: time.Hour},
		{Name: "b", Burst: 5, Count: 1, Period: time.Hour},
	}, httplimit.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 129)
	keys := []string{"", "plain", "{tag}", "}{", "=abc", "a}b", long, long + "y", "ключ"}
	for _, k := range keys {
		for _, name := range []string{"a", "b"} {
			sk := l.ServerKey(name, k)
			open, close := strings.IndexByte(sk, '{'), strings.IndexByte(sk, '}')
			if open < 0 || close < open+2 || strings.Count(sk, "{") != 1 || strings.Count(sk, "}") != 1 {
				t.Errorf("ServerKey(%q, %q) = %q: want one non-empty {tag}", name, k, sk)
			}
			if len(sk) > 2+len(name)+128+2 {
				t.Errorf("ServerKey(%q, %q) is %d bytes long", name, k, len(sk))
			}
		}
		if tagOf(l.ServerKey("a", k)) != tagOf(l.ServerKey("b", k)) {
			t.Errorf("key %q: policies have different tags", k)
		}
		d, err := l.Allow(context.Background(), k)
		if err != nil || !d.Allowed {
			t.Errorf("Allow(%q) = %+v, %v; want allowed (each key is new)", k, d, err)
		}
	}
	if n, err := rdb.DBSize(context.Background()).Result(); err != nil || n != int64(2*len(keys)) {
		t.Errorf("DBSIZE = %d, %v; want %d distinct keys", n, err, 2*len(keys))
	}
}

func tagOf(key string) string {
	return key[strings.IndexByte(key, '{'):]
}

func TestPolicyField(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: deadAddr(t)}) // never dialled
	defer rdb.Close()
	for _, tc := range []struct {
		p    httplimit.Policy
		want string
	}{
		{httplimit.Policy{Name: "p", Burst: 15, Count: 30, Period: time.Minute}, `"p";q=16;w=32`},
		{httplimit.Policy{Name: "p", Burst: 0, Count: 3, Period: time.Second}, `"p";q=1;w=1`},
		{httplimit.Policy{Name: "p", Burst: 999, Count: 1000, Period: time.Second}, `"p";q=1000;w=1`},
		{httplimit.Policy{Name: "p", Burst: 1 << 40, Count: 1, Period: httplimit.MaxPeriod}, `"p";q=1099511627777;w=999999999999999`},
		{httplimit.Policy{Name: "p", Algorithm: httplimit.TokenBucket, Burst: 100, Count: 10, Period: 1500 * time.Millisecond}, `"p";q=100;w=15`},
		{httplimit.Policy{Name: "p", Algorithm: httplimit.TokenBucketInterval, Burst: 10, Count: 4, Period: 3 * time.Second}, `"p";q=10;w=9`},
		{httplimit.Policy{Name: "p", Algorithm: httplimit.LeakyBucket, Burst: 40, Count: 2, Period: time.Second}, `"p";q=40;w=20`},
		{httplimit.Policy{Name: "p", Algorithm: httplimit.FixedWindow, Count: 5, Period: 1500 * time.Millisecond}, `"p";q=5;w=2`},
		{httplimit.Policy{Name: "p", Algorithm: httplimit.SlidingWindow, Count: 5, Period: time.Millisecond}, `"p";q=5;w=1`},
		{httplimit.Policy{Name: "p", Algorithm: httplimit.SlidingLog, Count: 5, Period: 24 * time.Hour}, `"p";q=5;w=86400`},
	} {
		l, err := httplimit.NewLimiter(rdb, []httplimit.Policy{tc.p})
		if err != nil {
			t.Errorf("NewLimiter(%+v): %v", tc.p, err)
			continue
		}
		if got := l.PolicyField(); got != tc.want {
			t.Errorf("PolicyField(%+v) = %s, want %s", tc.p, got, tc.want)
		}
	}
}

func TestNewLimiterInvalid(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: deadAddr(t)})
	defer rdb.Close()
	ok := httplimit.Policy{Name: "ok", Burst: 1, Count: 1, Period: time.Second}
	for _, tc := range []struct {
		name     string
		policies []httplimit.Policy
		opts     []httplimit.Option
		want     error
	}{
		{"no policy", nil, nil, httplimit.ErrInvalidPolicy},
		{"empty name", []httplimit.Policy{{Count: 1, Period: time.Second}}, nil, httplimit.ErrInvalidPolicy},
		{"quote in name", []httplimit.Policy{{Name: `a"b`, Count: 1, Period: time.Second}}, nil, httplimit.ErrInvalidPolicy},
		{"brace in name", []httplimit.Policy{{Name: "a{b", Count: 1, Period: time.Second}}, nil, httplimit.ErrInvalidPolicy},
		{"long name", []httplimit.Policy{{Name: strings.Repeat("n", 65), Count: 1, Period: time.Second}}, nil, httplimit.ErrInvalidPolicy},
		{"same name twice", []httplimit.Policy{ok, ok}, nil, httplimit.ErrInvalidPolicy},
		{"negative burst", []httplimit.Policy{{Name: "p", Burst: -1, Count: 1, Period: time.Second}}, nil, httplimit.ErrInvalidPolicy},
		{"burst over 2^40", []httplimit.Policy{{Name: "p", Burst: 1<<40 + 1, Count: 1, Period: time.Second}}, nil, httplimit.ErrInvalidPolicy},
		{"zero count", []httplimit.Policy{{Name: "p", Period: time.Second}}, nil, httplimit.ErrInvalidPolicy},
		{"zero period", []httplimit.Policy{{Name: "p", Count: 1}}, nil, httplimit.ErrInvalidPolicy},
		{"period too long", []httplimit.Policy{{Name: "p", Count: 1, Period: httplimit.MaxPeriod + time.Second}}, nil, httplimit.ErrInvalidPolicy},
		{"gcra sub-second", []httplimit.Policy{{Name: "p", Count: 1, Period: 1500 * time.Millisecond}}, nil, httplimit.ErrInvalidPolicy},
		{"sub-millisecond", []httplimit.Policy{{Name: "p", Algorithm: httplimit.FixedWindow, Count: 1, Period: time.Microsecond}}, nil, httplimit.ErrInvalidPolicy},
		{"bucket without capacity", []httplimit.Policy{{Name: "p", Algorithm: httplimit.TokenBucket, Count: 1, Period: time.Second}}, nil, httplimit.ErrInvalidPolicy},
		{"window with burst", []httplimit.Policy{{Name: "p", Algorithm: httplimit.SlidingLog, Burst: 1, Count: 1, Period: time.Second}}, nil, httplimit.ErrInvalidPolicy},
		{"unknown algorithm", []httplimit.Policy{{Name: "p", Algorithm: 99, Count: 1, Period: time.Second}}, nil, httplimit.ErrInvalidPolicy},
		{"several, not all GCRA", []httplimit.Policy{ok, {Name: "tb", Algorithm: httplimit.TokenBucket, Burst: 1, Count: 1, Period: time.Second}}, nil, httplimit.ErrInvalidPolicy},
		{"zero timeout", []httplimit.Policy{ok}, []httplimit.Option{httplimit.WithTimeout(0)}, httplimit.ErrInvalidOption},
		{"brace in prefix", []httplimit.Policy{ok}, []httplimit.Option{httplimit.WithKeyPrefix("{x}")}, httplimit.ErrInvalidOption},
		{"negative deny cache", []httplimit.Policy{ok}, []httplimit.Option{httplimit.WithDenyCache(-time.Second)}, httplimit.ErrInvalidOption},
	} {
		if _, err := httplimit.NewLimiter(rdb, tc.policies, tc.opts...); !errors.Is(err, tc.want) {
			t.Errorf("%s: NewLimiter = %v, want %v", tc.name, err, tc.want)
		}
		if _, err := httplimit.Middleware(rdb, tc.policies, httplimit.ByIP(), tc.opts...); !errors.Is(err, tc.want) {
			t.Errorf("%s: Middleware = %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := httplimit.Middleware(rdb, []httplimit.Policy{ok}, nil); !errors.Is(err, httplimit.ErrInvalidOption) {
		t.Errorf("Middleware with a nil KeyFunc = %v, want ErrInvalidOption", err)
	}
	if _, err := httplimit.NewLimiter(nil, []httplimit.Policy{ok}); !errors.Is(err, httplimit.ErrInvalidOption) {
		t.Errorf("NewLimiter with a nil client = %v, want ErrInvalidOption", err)
	}
}
