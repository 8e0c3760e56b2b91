package test

import (
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// TestRLSOperatorRules: the Envoy service's decisions go through the
// operator's rules like every other door's (decide.Rules): limit-override
// replaces the parameters the Envoy configuration gives a descriptor's
// key, and under limit-shadow a refusal answers OK and is counted as a
// shadow one (the service's rls_shadow_over_limit, the keyspace's
// shadow_limited).
func TestRLSOperatorRules(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules")
	rlsRules(t, rules, 10) // user=<any>: 10 a minute
	codes := func(args ...string) ([]pb.RateLimitResponse_Code, *server) {
		port := freePort(t)
		s := startServer(t, append([]string{"--save", "", "--rls-port", strconv.Itoa(port), "--rls-config", rules}, args...)...)
		c := rlsClient(t, port)
		var got []pb.RateLimitResponse_Code
		for range 3 {
			got = append(got, shouldRateLimit(t, c, "erin").OverallCode)
		}
		return got, s
	}
	ok, over := pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT

	// The override admits one request a minute where the rules allow 10.
	got, _ := codes("--limit-override", "rls:*app_user_* 0 1 60")
	if want := []pb.RateLimitResponse_Code{ok, over, over}; !slices.Equal(got, want) {
		t.Errorf("under limit-override 'rls:*app_user_* 0 1 60': %v, want %v", got, want)
	}

	// The override and a shadow together: the refusals answer OK and are
	// counted as shadow.
	got, s := codes("--limit-override", "rls:* 0 1 60", "--limit-shadow", "rls:*")
	if want := []pb.RateLimitResponse_Code{ok, ok, ok}; !slices.Equal(got, want) {
		t.Errorf("under limit-shadow 'rls:*': %v, want %v", got, want)
	}
	rdb := s.client(t, 2)
	info, err := rdb.Info(ctxT(t), "rls").Result()
	if err != nil {
		t.Fatal(err)
	}
	if n := parseInfo(info)["rls_shadow_over_limit"]; n != "2" {
		t.Errorf("INFO rls rls_shadow_over_limit = %q, want 2 (the two refusals answered OK)", n)
	}
	if n := shadowLimited(t, rdb); n != 2 {
		t.Errorf("INFO stats shadow_limited = %d, want 2", n)
	}
}
