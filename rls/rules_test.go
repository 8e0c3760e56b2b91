package rls

import (
	"strings"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/internal/limitpolicy"
)

// TestOperatorRules: Options.Rules (the decision path's decide.Rules)
// rewrites each descriptor's request before it is decided: an override
// replaces the YAML's parameters, a shadow pattern turns a refusal into an
// OK counted as shadow (Stats, the descriptor's statistics, the
// keyspace's Shadowed), an override that makes the request invalid is
// refused naming the descriptor and the rule.
func TestOperatorRules(t *testing.T) {
	const yaml = "domain: app\ndescriptors:\n  - key: user\n    rate_limit: {name: per_user, unit: minute, requests_per_unit: 10}\n" +
		"  - key: win\n    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: fixed-window}\n"
	for _, tc := range []struct {
		name             string
		override, shadow string
		desc             []string
		want             []pb.RateLimitResponse_Code
		shadowOver       int64
		refused          string // a substring of the InvalidArgument error; "" when served
	}{
		{name: "no rules", desc: []string{"user", "a"}, want: codes3(codeOK, codeOK, codeOK)},
		{name: "override", override: "rls:gcra:app_user_* 0 1 60", desc: []string{"user", "a"}, want: codes3(codeOK, codeOver, codeOver)},
		{name: "override elsewhere", override: "rls:gcra:other_* 0 1 60", desc: []string{"user", "a"}, want: codes3(codeOK, codeOK, codeOK)},
		{name: "shadow", override: "rls:* 0 1 60", shadow: "rls:*", desc: []string{"user", "a"}, want: codes3(codeOK, codeOK, codeOK), shadowOver: 2},
		{name: "invalid override", override: "rls:* 0 1 60", desc: []string{"win", "a"}, refused: "limit-override"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := &limitpolicy.Policy{}
			o, err := limitpolicy.ParseOverrides(tc.override)
			if err != nil {
				t.Fatal(err)
			}
			s, err := limitpolicy.ParseShadow(tc.shadow)
			if err != nil {
				t.Fatal(err)
			}
			pol.SetOverrides(o)
			pol.SetShadow(s)
			dir := t.TempDir()
			writeFile(t, dir, "app.yaml", yaml)
			h := newHarness(t, dir, Options{Rules: decide.Rules{Policy: pol}})
			req := request("app", desc(tc.desc...))
			if tc.refused != "" {
				_, err := h.client.ShouldRateLimit(t.Context(), req)
				if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.refused) || !strings.Contains(err.Error(), "descriptor 0") {
					t.Fatalf("ShouldRateLimit = %v; want InvalidArgument naming descriptor 0 and %q", err, tc.refused)
				}
				return
			}
			for i, want := range tc.want {
				if got := h.call(t, req).OverallCode; got != want {
					t.Errorf("call %d = %v, want %v", i+1, got, want)
				}
			}
			st := h.svc.Stats()
			if st.ShadowOverLimit != tc.shadowOver || st.OverLimit != int64(countCode(tc.want, codeOver)) {
				t.Errorf("stats: shadow codeOver limit %d, codeOver limit %d; want %d, %d", st.ShadowOverLimit, st.OverLimit, tc.shadowOver, countCode(tc.want, codeOver))
			}
			if d := st.Descriptors; len(d) != 1 || d[0].ShadowOverLimit != tc.shadowOver {
				t.Errorf("descriptor stats %+v; want one with shadow_over_limit %d", d, tc.shadowOver)
			}
			if got := h.store.Shadowed(); got != uint64(tc.shadowOver) {
				t.Errorf("keyspace shadowed %d, want %d", got, tc.shadowOver)
			}
		})
	}
}

const (
	codeOK   = pb.RateLimitResponse_OK
	codeOver = pb.RateLimitResponse_OVER_LIMIT
)

func codes3(a, b, c pb.RateLimitResponse_Code) []pb.RateLimitResponse_Code {
	return []pb.RateLimitResponse_Code{a, b, c}
}

func countCode(cs []pb.RateLimitResponse_Code, c pb.RateLimitResponse_Code) int {
	n := 0
	for _, x := range cs {
		if x == c {
			n++
		}
	}
	return n
}
