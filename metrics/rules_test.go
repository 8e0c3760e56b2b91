package metrics

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"gopkg.in/yaml.v3"

	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/region"
	"github.com/cellserver/cellserver/resp"
	"github.com/cellserver/cellserver/rls"
	"github.com/cellserver/cellserver/shards"
)

// The shipped alerting rules and dashboard (deploy/).
const (
	rulesFile     = "../deploy/prometheus/cellserver-rules.yaml"
	rulesTestFile = "../deploy/prometheus/cellserver-rules.test.yaml"
	dashboardFile = "../deploy/grafana/cellserver-dashboard.json"
)

// metricName finds the server's metric names in an expression (recording
// rules' names, cellserver:..., are not matched).
var metricName = regexp.MustCompile(`\bcellserver_[a-zA-Z0-9_]+`)

// TestShippedQueriesUseExportedMetrics starts a one-node cluster with its
// RESP server, sends limiter commands, scrapes /metrics and checks that
// every metric name in the rules' and the dashboard's expressions is one
// the server exports.
func TestShippedQueriesUseExportedMetrics(t *testing.T) {
	exported := liveMetricNames(t)
	var exprs []string
	var rules struct {
		Groups []struct {
			Rules []struct{ Expr string }
		}
	}
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	var dash struct {
		Panels []struct {
			Targets []struct{ Expr string }
		}
	}
	if b, err = os.ReadFile(dashboardFile); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	if len(exprs) < 10 {
		t.Fatalf("found %d expressions, want the rules' and the dashboard's", len(exprs))
	}
	used := 0
	for _, e := range exprs {
		for _, name := range metricName.FindAllString(e, -1) {
			used++
			if !exported[name] {
				t.Errorf("expression %q uses %s, which the server does not export", e, name)
			}
		}
	}
	if used == 0 {
		t.Error("no metric name found in the expressions")
	}
}

// liveMetricNames returns the sample names a scrape of a running node
// shows (a histogram's _bucket, _sum and _count included).
func liveMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	node := startOneNode(t)
	rc := resp.DefaultConfig()
	rc.Logger = discard()
	rc.MaxMemory = 1 << 30
	srv, err := resp.NewServer(rc, node)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	c := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), Protocol: 2})
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	p := c.Pipeline()
	for range 3200 { // limited decisions, and enough samples for the hot keys
		p.Do(ctx, "CL.THROTTLE", "k", "0", "1", "60")
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	// The rate-limit service, with a descriptor decided over its limit.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "web.yaml"), []byte("domain: web\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	svc := rls.New(rls.Options{Writer: node})
	if err := svc.Load(dir); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		req := &pb.RateLimitRequest{Domain: "web", Descriptors: []*rlpb.RateLimitDescriptor{{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "user", Value: "u"}}}}}
		if _, err := svc.ShouldRateLimit(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	// A region layer with one peer region (unreachable: its series exist
	// per configured peer, called or not).
	store, err := shards.New(shards.Config{Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	now := func() int64 { return time.Now().UnixNano() }
	gate, err := region.New(region.Config{Name: "us", Peers: []region.PeerConfig{{Name: "eu", Addrs: []string{"127.0.0.1:1"}}},
		Timeout: time.Second, Logger: discard(), Now: now}, decide.NewLocal(store, now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gate.Close)
	h, err := Listen("127.0.0.1:0", NewRegistry(Sources{Server: srv, Store: node.Store(), Raft: node, RLS: svc, Regions: gate}), nil, discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	res, err := http.Get("http://" + h.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		names[strings.FieldsFunc(line, func(r rune) bool { return r == '{' || r == ' ' })[0]] = true
	}
	return names
}

// TestRulesPromtool checks the rules file and runs its unit tests with
// promtool (Debian's prometheus package; scripts/test.sh installs it).
func TestRulesPromtool(t *testing.T) {
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Skip("promtool not installed (scripts/test.sh installs it)")
	}
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", rulesTestFile}} {
		if out, err := exec.Command("promtool", args...).CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
