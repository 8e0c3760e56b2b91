package rls

import (
	"context"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const (
	ok        = pb.RateLimitResponse_OK
	overLimit = pb.RateLimitResponse_OVER_LIMIT
	second    = pb.RateLimitResponse_RateLimit_SECOND
	minute    = pb.RateLimitResponse_RateLimit_MINUTE
	hour      = pb.RateLimitResponse_RateLimit_HOUR
)

// TestExampleConfig drives every descriptor shape of envoyproxy/ratelimit's
// example configuration (testdata/example.yaml, testdata/config.yaml): a
// fresh key admits requests_per_unit requests (GCRA with its default burst)
// and refuses the next, with the rule's limit in current_limit.
func TestExampleConfig(t *testing.T) {
	tests := []struct {
		name   string
		domain string
		desc   *rlpb.RateLimitDescriptor
		// allowed is how many requests in a row are OK; the next is
		// wantNext. allowed -1: no limit applies (no current_limit).
		allowed  int
		wantNext pb.RateLimitResponse_Code
		rpu      uint32
		unit     pb.RateLimitResponse_RateLimit_Unit
		limName  string
	}{
		{"key and value", "rl", desc("category", "account"), 4, overLimit, 4, minute, ""},
		{"nested values", "rl", desc("source_cluster", "proxy", "destination_cluster", "mock"), 1, overLimit, 1, minute, ""},
		{"nested with replaces", "rl", desc("source_cluster", "proxy", "destination_cluster", "bkthomps"), 2, overLimit, 2, minute, ""},
		{"nested named", "rl", desc("source_cluster", "proxy", "destination_cluster", "fake"), 2, overLimit, 2, minute, "fake_name"},
		{"parent level without a limit", "rl", desc("source_cluster", "proxy"), -1, ok, 0, 0, ""},
		{"nested value unknown", "rl", desc("source_cluster", "proxy", "destination_cluster", "other"), -1, ok, 0, 0, ""},
		{"key only", "rl", desc("foo", "anything"), 2, overLimit, 2, minute, ""},
		{"key only, empty value", "rl", desc("foo", ""), 2, overLimit, 2, minute, ""},
		{"nested key only", "rl", desc("foo", "x", "bar", "y"), 3, overLimit, 3, minute, ""},
		{"nested value beats key only", "rl", desc("foo", "x", "bar", "bkthomps"), 1, overLimit, 1, minute, "bkthomps"},
		{"requests_per_unit 0 bans", "rl", desc("foo", "x", "bar", "banned"), 0, overLimit, 0, minute, "banned_limit"},
		{"nested per second", "rl", desc("foo", "x", "baz", "other"), 1, overLimit, 1, second, ""},
		{"nested value per minute", "rl", desc("foo", "x", "baz", "not-so-shady"), 3, overLimit, 3, minute, ""},
		{"shadow mode answers OK", "rl", desc("foo", "x", "baz", "shady"), 3, ok, 3, minute, ""},
		{"detailed_metric", "rl", desc("unspec", "v"), 2, overLimit, 2, minute, ""},
		{"quota mode alone", "rl", desc("service", "service_1"), 1, overLimit, 1, minute, ""},
		{"quota mode 2", "rl", desc("service", "service_2"), 2, overLimit, 2, minute, ""},
		{"deeper than the rules", "rl", desc("foo", "x", "bar", "y", "extra", "z"), -1, ok, 0, 0, ""},
		{"unknown key", "rl", desc("nope", "x"), -1, ok, 0, 0, ""},
		{"unknown domain", "nowhere", desc("category", "account"), -1, ok, 0, 0, ""},
		{"second file", "mongo_cps", desc("database", "users"), 500, overLimit, 500, second, ""},
		{"second file, no rule", "mongo_cps", desc("database", "other"), -1, ok, 0, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, "testdata", Options{})
			req := request(tt.domain, tt.desc)
			for i := 0; i < max(tt.allowed, 1); i++ {
				r := h.call(t, req)
				st := r.Statuses[0]
				if tt.allowed < 0 {
					if r.OverallCode != ok || st.Code != ok || st.CurrentLimit != nil {
						t.Fatalf("call %d = %v; want OK without a limit", i+1, r)
					}
					return
				}
				if tt.allowed == 0 {
					break
				}
				if r.OverallCode != ok || st.Code != ok {
					t.Fatalf("call %d of %d = %v; want OK", i+1, tt.allowed, r)
				}
				if want := uint32(tt.allowed - i - 1); st.LimitRemaining != want {
					t.Errorf("call %d: limit_remaining = %d, want %d", i+1, st.LimitRemaining, want)
				}
			}
			r := h.call(t, req)
			st := r.Statuses[0]
			if r.OverallCode != tt.wantNext || st.Code != tt.wantNext {
				t.Fatalf("call %d = %v; want %v", tt.allowed+1, r, tt.wantNext)
			}
			cl := st.CurrentLimit
			if cl == nil || cl.RequestsPerUnit != tt.rpu || cl.Unit != tt.unit || cl.Name != tt.limName {
				t.Errorf("current_limit = %v, want %d per %v named %q", cl, tt.rpu, tt.unit, tt.limName)
			}
			if st.LimitRemaining != 0 {
				t.Errorf("limit_remaining after the limit = %d, want 0", st.LimitRemaining)
			}
			if d := st.DurationUntilReset.AsDuration(); d <= 0 || d > unitDuration(tt.unit) {
				t.Errorf("duration_until_reset = %v, want in (0, %v]", d, unitDuration(tt.unit))
			}
		})
	}
}

func unitDuration(u pb.RateLimitResponse_RateLimit_Unit) time.Duration {
	return time.Duration(unitSeconds[u]) * time.Second
}

// TestUnlimited: unlimited rules answer OK with limit_remaining at its
// maximum and never count.
func TestUnlimited(t *testing.T) {
	h := newHarness(t, "testdata", Options{})
	for _, d := range []*rlpb.RateLimitDescriptor{desc("qux", "any"), desc("foo", "x", "bay", "y")} {
		for i := 0; i < 10; i++ {
			r := h.call(t, request("rl", d))
			if st := r.Statuses[0]; r.OverallCode != ok || st.Code != ok || st.LimitRemaining != math.MaxUint32 || st.CurrentLimit != nil {
				t.Fatalf("%v call %d = %v; want OK, remaining max", d, i, r)
			}
		}
	}
	if n := h.store.Len(h.clock.Now()); n != 0 {
		t.Errorf("keys after unlimited calls = %d, want 0", n)
	}
}

// TestShadowModeCounts: a shadow-mode rule over its limit answers OK but is
// counted, and does not stop the other descriptors from consuming.
func TestShadowModeCounts(t *testing.T) {
	h := newHarness(t, "testdata", Options{})
	shady := desc("foo", "x", "baz", "shady") // 3 per minute, shadow
	for i := 0; i < 3; i++ {
		h.call(t, request("rl", shady))
	}
	r := h.call(t, request("rl", shady, desc("category", "account")))
	if r.OverallCode != ok || r.Statuses[0].Code != ok || r.Statuses[1].Code != ok {
		t.Fatalf("shadow over limit = %v; want all OK", r)
	}
	if got := r.Statuses[1].LimitRemaining; got != 3 {
		t.Errorf("account remaining = %d, want 3 (consumed despite the shadow rule)", got)
	}
	if got := h.svc.Stats().ShadowOverLimit; got != 1 {
		t.Errorf("ShadowOverLimit = %d, want 1", got)
	}
}

// TestAllOrNothing: enforced descriptors of one request are decided
// atomically; when one is over its limit, none consumes.
func TestAllOrNothing(t *testing.T) {
	h := newHarness(t, "testdata", Options{})
	account := desc("category", "account")                                 // 4/min
	mock := desc("source_cluster", "proxy", "destination_cluster", "mock") // 1/min
	if r := h.call(t, request("rl", account, mock)); r.OverallCode != ok {
		t.Fatalf("first = %v; want OK", r)
	}
	r := h.call(t, request("rl", account, mock))
	if r.OverallCode != overLimit || r.Statuses[0].Code != ok || r.Statuses[1].Code != overLimit {
		t.Fatalf("second = %v; want OVER_LIMIT from mock only", r)
	}
	if got := r.Statuses[0].LimitRemaining; got != 3 {
		t.Errorf("account remaining in the refused call = %d, want 3 (a peek)", got)
	}
	if got := h.call(t, request("rl", account)).Statuses[0].LimitRemaining; got != 2 {
		t.Errorf("account remaining after = %d, want 2 (the refused call consumed nothing)", got)
	}
}

// TestReplaces: a matched limit that names another in replaces turns it off
// for that request.
func TestReplaces(t *testing.T) {
	h := newHarness(t, "testdata", Options{})
	banned := desc("foo", "x", "bar", "banned")
	override := desc("source_cluster", "proxy", "destination_cluster", "override") // replaces banned_limit
	if r := h.call(t, request("rl", banned)); r.OverallCode != overLimit {
		t.Fatalf("banned alone = %v; want OVER_LIMIT", r)
	}
	r := h.call(t, request("rl", override, banned))
	if r.OverallCode != ok || r.Statuses[1].Code != ok || r.Statuses[1].CurrentLimit != nil {
		t.Fatalf("banned replaced = %v; want OK without a limit", r)
	}
	// category account replaces bkthomps (1/min) and fake_name.
	bk := desc("foo", "x", "bar", "bkthomps")
	for i := 0; i < 3; i++ {
		r := h.call(t, request("rl", desc("category", "account"), bk))
		if r.OverallCode != ok || r.Statuses[1].CurrentLimit != nil {
			t.Fatalf("call %d with bkthomps replaced = %v; want OK", i+1, r)
		}
	}
}

// TestQuotaMode: an over-limit quota descriptor makes the request over
// limit only when every quota descriptor is.
func TestQuotaMode(t *testing.T) {
	h := newHarness(t, "testdata", Options{})
	s1, s2 := desc("service", "service_1"), desc("service", "service_2") // 1/min, 2/min
	h.call(t, request("rl", s1))
	r := h.call(t, request("rl", s1, s2))
	if r.OverallCode != ok || r.Statuses[0].Code != overLimit || r.Statuses[1].Code != ok {
		t.Fatalf("one quota over = %v; want OK overall", r)
	}
	h.call(t, request("rl", s2))
	r = h.call(t, request("rl", s1, s2))
	if r.OverallCode != overLimit {
		t.Fatalf("every quota over = %v; want OVER_LIMIT", r)
	}
}

// TestHitsAddend: the request's hits_addend (0 means 1), a descriptor's own
// (0 peeks), a refund, and values too large.
func TestHitsAddend(t *testing.T) {
	account := func() *rlpb.RateLimitDescriptor { return desc("category", "account") } // 4/min
	tests := []struct {
		name       string
		reqHits    uint32
		descHits   *wrapperspb.UInt64Value
		negative   bool
		wantCode   pb.RateLimitResponse_Code
		wantRemain uint32
		wantErr    codes.Code
	}{
		{name: "default", wantCode: ok, wantRemain: 3},
		{name: "request 3", reqHits: 3, wantCode: ok, wantRemain: 1},
		{name: "request 4", reqHits: 4, wantCode: ok, wantRemain: 0},
		{name: "request 5: more than the limit", reqHits: 5, wantCode: overLimit, wantRemain: 4},
		{name: "request max uint32", reqHits: math.MaxUint32, wantCode: overLimit, wantRemain: 4},
		{name: "descriptor 2 wins", reqHits: 3, descHits: wrapperspb.UInt64(2), wantCode: ok, wantRemain: 2},
		{name: "descriptor 0 peeks", reqHits: 3, descHits: wrapperspb.UInt64(0), wantCode: ok, wantRemain: 4},
		{name: "descriptor 2^40", descHits: wrapperspb.UInt64(1 << 40), wantCode: overLimit, wantRemain: 4},
		{name: "descriptor 2^40+1", descHits: wrapperspb.UInt64(1<<40 + 1), wantErr: codes.InvalidArgument},
		{name: "descriptor max uint64", descHits: wrapperspb.UInt64(math.MaxUint64), wantErr: codes.InvalidArgument},
		{name: "refund on a fresh key", negative: true, wantCode: ok, wantRemain: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, "testdata", Options{})
			d := account()
			d.HitsAddend, d.IsNegativeHits = tt.descHits, tt.negative
			req := request("rl", d)
			req.HitsAddend = tt.reqHits
			r, err := h.client.ShouldRateLimit(context.Background(), req)
			if tt.wantErr != codes.OK {
				if status.Code(err) != tt.wantErr {
					t.Fatalf("ShouldRateLimit = %v, %v; want code %v", r, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st := r.Statuses[0]; r.OverallCode != tt.wantCode || st.LimitRemaining != tt.wantRemain {
				t.Fatalf("ShouldRateLimit = %v; want %v remaining %d", r, tt.wantCode, tt.wantRemain)
			}
		})
	}
}

// TestRefund: is_negative_hits gives back what was taken.
func TestRefund(t *testing.T) {
	h := newHarness(t, "testdata", Options{})
	req := request("rl", desc("category", "account"))
	req.HitsAddend = 3
	h.call(t, req)
	d := desc("category", "account")
	d.HitsAddend, d.IsNegativeHits = wrapperspb.UInt64(2), true
	if got := h.call(t, request("rl", d)).Statuses[0].LimitRemaining; got != 3 {
		t.Errorf("remaining after refunding 2 of 3 = %d, want 3", got)
	}
}

// TestBadRequests: malformed requests are InvalidArgument, never a panic.
func TestBadRequests(t *testing.T) {
	h := newHarness(t, "testdata", Options{})
	many := make([]*rlpb.RateLimitDescriptor, MaxDescriptors+1)
	for i := range many {
		many[i] = desc("category", "account")
	}
	badOverride := desc("a", "b")
	badOverride.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: 99}
	tooFast := desc("a", "b")
	tooFast.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: math.MaxUint32, Unit: 1}
	tests := []struct {
		name string
		req  *pb.RateLimitRequest
	}{
		{"empty domain", request("", desc("category", "account"))},
		{"no descriptors", request("rl")},
		{"too many descriptors", request("rl", many...)},
		{"override with an unknown unit", request("rl", badOverride)},
		{"override faster than 1 per ns", request("rl", tooFast)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := h.client.ShouldRateLimit(context.Background(), tt.req)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("ShouldRateLimit = %v, %v; want InvalidArgument", r, err)
			}
		})
	}
	// An empty descriptor has no limit.
	if r := h.call(t, request("rl", &rlpb.RateLimitDescriptor{})); r.OverallCode != ok {
		t.Errorf("empty descriptor = %v; want OK", r)
	}
}

// TestOverride: a limit sent with the descriptor (Envoy's limit override)
// applies instead of the configuration's.
func TestOverride(t *testing.T) {
	h := newHarness(t, "testdata", Options{})
	d := desc("category", "account")
	d.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: 3, UnitMultiplier: wrapperspb.UInt32(2)} // 2 per 2 hours
	for i, want := range []pb.RateLimitResponse_Code{ok, ok, overLimit} {
		r := h.call(t, request("rl", d))
		if r.OverallCode != want || r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 2 || r.Statuses[0].CurrentLimit.GetUnit() != hour {
			t.Fatalf("call %d = %v; want %v at 2 per hour", i+1, r, want)
		}
	}
	if got := h.call(t, request("rl", d)).Statuses[0].DurationUntilReset.AsDuration(); got != time.Hour {
		t.Errorf("retry after the override = %v, want 1h (2 per 2 hours)", got)
	}
}

// TestAlgorithms: the extension fields choose the limiter and the burst.
func TestAlgorithms(t *testing.T) {
	h := newHarness(t, "testdata", Options{})
	take := func(route string) *pb.RateLimitResponse { return h.call(t, request("ext", desc("route", route))) }

	// GCRA, 10 per second: 10 at once, then one every 100 ms.
	for i := 0; i < 10; i++ {
		if r := take("gcra"); r.OverallCode != ok {
			t.Fatalf("gcra call %d = %v", i+1, r)
		}
	}
	r := take("gcra")
	if r.OverallCode != overLimit || r.Statuses[0].DurationUntilReset.AsDuration() != 100*time.Millisecond {
		t.Fatalf("gcra 11th = %v; want OVER_LIMIT, retry in 100ms", r)
	}
	h.clock.Advance(100 * time.Millisecond)
	if r := take("gcra"); r.OverallCode != ok {
		t.Fatalf("gcra after 100ms = %v; want OK", r)
	}

	// GCRA with burst 5 at 60 per minute: 5 at once.
	for i := 0; i < 5; i++ {
		if r := take("burst"); r.OverallCode != ok {
			t.Fatalf("burst call %d = %v", i+1, r)
		}
	}
	if r := take("burst"); r.OverallCode != overLimit || r.Statuses[0].CurrentLimit.RequestsPerUnit != 60 {
		t.Fatalf("burst 6th = %v; want OVER_LIMIT at 60 per minute", r)
	}

	// Fixed window, 3 per minute, windows on the minute: reset at the
	// window's end.
	h.clock.Advance(10 * time.Second)
	for i := 0; i < 3; i++ {
		take("fixed")
	}
	r = take("fixed")
	if want := 50*time.Second - 100*time.Millisecond; r.OverallCode != overLimit || r.Statuses[0].DurationUntilReset.AsDuration() != want {
		t.Fatalf("fixed 4th = %v; want OVER_LIMIT, reset in %v", r, want)
	}

	// Sliding window, 3 per minute: still limited just after the fixed
	// window would have reset.
	for i := 0; i < 3; i++ {
		take("sliding")
	}
	h.clock.Advance(51 * time.Second)
	if r := take("fixed"); r.OverallCode != ok {
		t.Fatalf("fixed in the next window = %v; want OK", r)
	}
	if r := take("sliding"); r.OverallCode != overLimit {
		t.Fatalf("sliding 1s into the next window = %v; want OVER_LIMIT", r)
	}
}

// TestWildcards: value patterns match after exact values; share_threshold
// makes every match share one counter.
func TestWildcards(t *testing.T) {
	h := newHarness(t, "testdata", Options{})
	take := func(d *rlpb.RateLimitDescriptor) *pb.RateLimitResponse { return h.call(t, request("ext", d)) }
	tests := []struct {
		d   *rlpb.RateLimitDescriptor
		rpu uint32
	}{
		{desc("path", "/files/a"), 2},
		{desc("path", "/files/"), 2},
		{desc("path", "/files/exact"), 5},
		{desc("path", "/shared/x.pdf"), 2},
		{desc("user", "u1", "path", "/api/v1"), 1},
		{desc("path", "/other"), 0},
		{desc("path", "/shared/x.txt"), 0},
	}
	for _, tt := range tests {
		if got := take(tt.d).Statuses[0].CurrentLimit.GetRequestsPerUnit(); got != tt.rpu {
			t.Errorf("%v: requests_per_unit = %d, want %d", tt.d, got, tt.rpu)
		}
	}
	// Without share_threshold each value counts apart.
	if r := take(desc("path", "/files/b")); r.OverallCode != ok || r.Statuses[0].LimitRemaining != 1 {
		t.Errorf("/files/b first = %v; want OK, 1 left", r)
	}
	// With it, /shared/y.pdf shares x.pdf's counter (one taken above).
	if r := take(desc("path", "/shared/y.pdf")); r.OverallCode != ok || r.Statuses[0].LimitRemaining != 0 {
		t.Errorf("/shared/y.pdf = %v; want OK, 0 left", r)
	}
	if r := take(desc("path", "/shared/z.pdf")); r.OverallCode != overLimit {
		t.Errorf("/shared/z.pdf = %v; want OVER_LIMIT", r)
	}
}

// TestResponseHeaders: the IETF and legacy header sets describe the most
// constrained descriptor.
func TestResponseHeaders(t *testing.T) {
	tests := []struct {
		mode HeaderMode
		hits []uint32 // hits_addend of each call; headers of the last
		want map[string]string
	}{
		{HeadersOff, []uint32{1}, map[string]string{}},
		{HeadersLegacy, []uint32{1}, map[string]string{"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "1", "X-RateLimit-Reset": "30"}},
		{HeadersIETF, []uint32{1}, map[string]string{"RateLimit-Policy": `"fake_name";q=2;w=60`, "RateLimit": `"fake_name";r=1;t=30`}},
		{HeadersLegacy, []uint32{2, 1}, map[string]string{"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "30", "Retry-After": "30"}},
		{HeadersIETF, []uint32{2, 1}, map[string]string{"RateLimit-Policy": `"fake_name";q=2;w=60`, "RateLimit": `"fake_name";r=0;t=30`, "Retry-After": "30"}},
		{HeadersLegacy, []uint32{3}, map[string]string{"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "2", "X-RateLimit-Reset": "0"}},
	}
	for _, tt := range tests {
		t.Run(tt.mode.String(), func(t *testing.T) {
			h := newHarness(t, "testdata", Options{Headers: tt.mode})
			req := request("rl", desc("category", "other"), desc("source_cluster", "proxy", "destination_cluster", "fake"))
			var r *pb.RateLimitResponse
			for _, hits := range tt.hits {
				req.HitsAddend = hits
				r = h.call(t, req)
			}
			got := map[string]string{}
			for _, hv := range r.ResponseHeadersToAdd {
				got[hv.Key] = hv.Value
			}
			if len(got) != len(tt.want) {
				t.Fatalf("headers = %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("header %s = %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
		})
	}
}

// TestKeyEscaping: distinct descriptors never share a key.
func TestKeyEscaping(t *testing.T) {
	a := appendKey(nil, GCRA, "d", desc("a_b", "c").Entries, nil)
	b := appendKey(nil, GCRA, "d", desc("a", "b_c").Entries, nil)
	if string(a) == string(b) {
		t.Fatalf("keys of a_b=c and a=b_c are both %q", a)
	}
	if got, want := string(appendKey(nil, SlidingWindow, "rl", desc("foo", "x%y").Entries, nil)), "rls:sliding-window:rl_foo_x%25y"; got != want {
		t.Errorf("key = %q, want %q", got, want)
	}
}

// TestNoGrow: over maxmemory (NoGrow true) a descriptor that would create a
// key is refused with ResourceExhausted; a key that exists still decides.
func TestNoGrow(t *testing.T) {
	var full atomic.Bool
	h := newHarness(t, "testdata", Options{NoGrow: full.Load})
	h.call(t, request("rl", desc("category", "account")))
	full.Store(true)
	if r := h.call(t, request("rl", desc("category", "account"))); r.OverallCode != ok || r.Statuses[0].LimitRemaining != 2 {
		t.Fatalf("existing key over maxmemory = %v; want OK, 2 left", r)
	}
	r, err := h.client.ShouldRateLimit(context.Background(), request("rl", desc("foo", "new")))
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("new key over maxmemory = %v, %v; want ResourceExhausted", r, err)
	}
	full.Store(false)
	if r := h.call(t, request("rl", desc("foo", "new"))); r.OverallCode != ok {
		t.Fatalf("new key under maxmemory = %v; want OK", r)
	}
}

// TestHeaderPick: the headers describe a limited descriptor first, then the
// one with the least remaining; Retry-After is the longest wait among the
// limited ones (all must allow the request again), or none when one of
// them never will.
func TestHeaderPick(t *testing.T) {
	type add struct {
		limited   bool
		remaining uint32
		retry     int64
	}
	tests := []struct {
		name      string
		adds      []add
		pick      int
		retry     int64
		remaining uint32
	}{
		{"none limited: least remaining", []add{{false, 5, -1}, {false, 2, -1}}, 1, -1, 2},
		{"a limited one first", []add{{false, 0, -1}, {true, 0, 10}}, 1, 10, 0},
		{"longest wait of two limited", []add{{true, 0, 1e9}, {true, 0, 3600e9}}, 0, 3600e9, 0},
		{"one limited never allows", []add{{true, 0, 3600e9}, {true, 0, -1}}, 0, -1, 0},
	}
	for _, tt := range tests {
		var h headerPick
		h.init()
		for i, a := range tt.adds {
			h.add(i, a.limited, a.remaining, a.retry)
		}
		if h.pick != tt.pick || h.retry != tt.retry || h.remaining != tt.remaining {
			t.Errorf("%s: pick %d, retry %d, remaining %d; want %d, %d, %d", tt.name, h.pick, h.retry, h.remaining, tt.pick, tt.retry, tt.remaining)
		}
	}
}

// TestPolicyHeaderShape: RateLimit-Policy's q and w follow the limit's
// shape as the HTTP middleware derives them (internal/ratepolicy): q is
// the most admitted at once (what r counts down from), w the time an
// exhausted key takes to get q back; for windows, the limit and the window.
func TestPolicyHeaderShape(t *testing.T) {
	h := newHarness(t, "testdata", Options{Headers: HeadersIETF})
	for _, tt := range []struct {
		route string
		want  string
	}{
		{"gcra", `"default";q=10;w=1`},    // 10 a second, 10 at once
		{"burst", `"default";q=5;w=5`},    // 60 a minute, 5 at once: 5 back in 5 s
		{"sliding", `"default";q=3;w=60`}, // 3 in any minute
		{"fixed", `"default";q=3;w=60`},
	} {
		r := h.call(t, request("ext", desc("route", tt.route)))
		got := ""
		for _, hv := range r.ResponseHeadersToAdd {
			if hv.Key == "RateLimit-Policy" {
				got = hv.Value
			}
		}
		if got != tt.want {
			t.Errorf("route %s: RateLimit-Policy = %q, want %q", tt.route, got, tt.want)
		}
	}
}

// decisionLog records what Options.Decided is told.
type decisionLog struct {
	mu      sync.Mutex
	allowed map[string]int
	limited map[string]int
}

func (d *decisionLog) decided(key []byte, limited bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if limited {
		d.limited[string(key)]++
	} else {
		d.allowed[string(key)]++
	}
}

// TestDecidedHook: each descriptor decided in the keyspace is reported with
// the limiter key it used and whether it was over the limit (a shadow
// one too), so that the server's heavy hitters count the Envoy service's
// keys; unlimited descriptors, which take no key, are not.
func TestDecidedHook(t *testing.T) {
	log := &decisionLog{allowed: map[string]int{}, limited: map[string]int{}}
	h := newHarness(t, "testdata", Options{Decided: log.decided})
	shady := desc("foo", "x", "baz", "shady") // 3 per minute, shadow
	for range 5 {
		h.call(t, request("rl", shady))
	}
	h.call(t, request("rl", desc("qux", "any"))) // unlimited
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.allowed) != 1 || len(log.limited) != 1 {
		t.Fatalf("decided: allowed %v, limited %v; want one key, allowed 3 times and limited twice", log.allowed, log.limited)
	}
	for k, n := range log.allowed {
		if n != 3 || log.limited[k] != 2 || !strings.HasPrefix(k, "rls:") || !strings.Contains(k, "shady") {
			t.Errorf("key %q: allowed %d, limited %d; want the shadow descriptor's key, 3 and 2", k, n, log.limited[k])
		}
	}
}
