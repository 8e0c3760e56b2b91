package rls

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const statsConfig = `domain: web
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: path
    value: /login
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: path
    value: /free
    rate_limit: {unlimited: true}
  - key: bulk
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: fixed-window}
  - key: ip
    value: "10.*"
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 1}
`

// statsOf returns the pair's counts as "total/over/near/shadow", or "-".
func statsOf(st Stats, domain, descriptor string) string {
	for _, d := range st.Descriptors {
		if d.Domain == domain && d.Descriptor == descriptor {
			return fmt.Sprintf("%d/%d/%d/%d", d.TotalHits, d.OverLimit, d.NearLimit, d.ShadowOverLimit)
		}
	}
	return "-"
}

// TestDescriptorStats: each rule counts its hits, those over its limit
// (shadow-mode ones too, and apart), and those allowed with at most 20%
// of the limit left.
func TestDescriptorStats(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "web.yaml", statsConfig)
	override := desc("category", "account")
	override.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: 3} // 2 per hour
	peek := desc("user", "carol")
	peek.HitsAddend = wrapperspb.UInt64(0)
	tests := []struct {
		name       string
		reqs       []*pb.RateLimitRequest // sent in order, each once
		descriptor string
		want       string // total/over/near/shadow
	}{
		// 5 per minute: the 4th and 5th leave 1 and 0 (≤ 20% of 5).
		{"enforced", repeat(6, request("web", desc("user", "alice"))), "user", "6/1/2/0"},
		// 2 per minute in shadow mode: the 2nd leaves 0, the 3rd is over
		// (and answered OK).
		{"shadow", repeat(3, request("web", desc("path", "/login"))), "path_/login", "3/1/1/1"},
		{"unlimited", repeat(2, request("web", desc("path", "/free"))), "path_/free", "2/0/0/0"},
		// hits_addend 3 on 10 per window: 7, 4, 1 left (1 ≤ 2: near), then
		// 3 more do not fit.
		{"hits", repeat(4, &pb.RateLimitRequest{Domain: "web", Descriptors: []*rlpb.RateLimitDescriptor{desc("bulk", "b")}, HitsAddend: 3}),
			"bulk", "12/3/3/0"},
		// A wildcard rule is named as the file writes it.
		{"wildcard", repeat(2, request("web", desc("ip", "10.1.2.3", "user", "bob"))), "ip_10.*.user", "2/1/1/0"},
		// A limit sent with the descriptor is named by the entries.
		{"override", repeat(3, request("web", override)), "category_account", "3/1/1/0"},
		// A peek takes nothing: no hit.
		{"peek", repeat(2, request("web", peek)), "user", "-"},
		{"no rule", repeat(2, request("web", desc("nothing", "x"))), "nothing_x", "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, dir, Options{})
			for _, r := range tt.reqs {
				h.call(t, r)
			}
			if got := statsOf(h.svc.Stats(), "web", tt.descriptor); got != tt.want {
				t.Errorf("stats of web/%s = %s, want %s (total/over/near/shadow); all: %+v", tt.descriptor, got, tt.want, h.svc.Stats().Descriptors)
			}
		})
	}
}

// TestDescriptorStatsLimit: beyond StatsLimit pairs, the others count
// under _overflow, whatever their domain.
func TestDescriptorStatsLimit(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "web.yaml", statsConfig)
	h := newHarness(t, dir, Options{StatsLimit: 2})
	for _, r := range []*pb.RateLimitRequest{
		request("web", desc("user", "a")),
		request("web", desc("path", "/free")),
		request("web", desc("bulk", "x")),
		request("web", desc("ip", "10.0.0.1", "user", "u")),
		request("web", desc("user", "b")),
	} {
		h.call(t, r)
	}
	st := h.svc.Stats()
	var got []string
	for _, d := range st.Descriptors {
		got = append(got, fmt.Sprintf("%s/%s=%d", d.Domain, d.Descriptor, d.TotalHits))
	}
	want := "web/user=2 web/path_/free=1 _overflow/_overflow=2"
	if strings.Join(got, " ") != want {
		t.Errorf("Descriptors = %q, want %q", strings.Join(got, " "), want)
	}
	if st.StatsLimit != 2 {
		t.Errorf("StatsLimit = %d, want 2", st.StatsLimit)
	}
}

// TestDescriptorStatsReload: a pair's counts outlive a reload of the
// rules (they are named, not tied to the loaded rule).
func TestDescriptorStatsReload(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "web.yaml", statsConfig)
	h := newHarness(t, dir, Options{})
	h.call(t, request("web", desc("user", "a")))
	writeFile(t, dir, "web.yaml", strings.Replace(statsConfig, "requests_per_unit: 5", "requests_per_unit: 50", 1))
	if err := h.svc.Load(filepath.Clean(dir)); err != nil {
		t.Fatal(err)
	}
	h.call(t, request("web", desc("user", "a")))
	if got := statsOf(h.svc.Stats(), "web", "user"); got != "2/0/0/0" {
		t.Errorf("after a reload: %s, want 2/0/0/0", got)
	}
}

func repeat(n int, r *pb.RateLimitRequest) []*pb.RateLimitRequest {
	out := make([]*pb.RateLimitRequest, n)
	for i := range out {
		out[i] = r
	}
	return out
}
