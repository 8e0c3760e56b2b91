package test

import (
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrapeMetrics fetches and parses /metrics at addr.
func scrapeMetrics(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	res, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mf, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return mf
}

// counterOf returns the counter of family name whose labels include the
// pairs given, or -1 when there is none.
func counterOf(mf map[string]*dto.MetricFamily, name string, labels ...string) float64 {
next:
	for _, m := range mf[name].GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			if !hasLabel(m, labels[i], labels[i+1]) {
				continue next
			}
		}
		return m.GetCounter().GetValue()
	}
	return -1
}

// TestClassesAndRLSStats: after a load over RESP and the rate-limit
// service, the real binary shows the decisions by key class and the
// service's per-descriptor counters in INFO and on /metrics; CONFIG SET
// metrics-class changes the classes live.
func TestClassesAndRLSStats(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules")
	rlsRules(t, rules, 2) // app: user=<any>, 2 per minute
	port, mport := freePort(t), freePort(t)
	maddr := "127.0.0.1:" + strconv.Itoa(mport)
	s := startServer(t, "--metrics-addr", maddr, "--rls-port", strconv.Itoa(port), "--rls-config", rules,
		"--metrics-class", "vip vip:*", "--metrics-class-limit", "2")
	ctx := ctxT(t)
	c := s.client(t, 2)
	throttle := func(key string, n int) {
		t.Helper()
		for range n {
			if err := c.Do(ctx, "CL.THROTTLE", key, "0", "1", "60").Err(); err != nil { // 1 allowed, then limited
				t.Fatal(err)
			}
		}
	}
	throttle("vip:1", 3)   // vip: 1 allowed, 2 limited
	throttle("user:1", 2)  // user: 1, 1
	throttle("ip:1", 1)    // ip: 1, 0
	throttle("order:1", 1) // over the limit of 2 prefixes: other
	rc := rlsClient(t, port)
	for range 3 {
		shouldRateLimit(t, rc, "alice") // OK (1 left), OK (0 left: near), OVER_LIMIT
	}

	info := func(section string) map[string]string {
		t.Helper()
		text, err := c.Info(ctx, section).Result()
		if err != nil {
			t.Fatal(err)
		}
		return parseInfo(text)
	}
	ci := info("classes")
	for k, want := range map[string]string{
		"metrics_class_limit": "2", "metrics_class_prefixes": "2",
		"class_vip":   "kind=rule,allowed=1,limited=2",
		"class_user":  "kind=prefix,allowed=1,limited=1",
		"class_ip":    "kind=prefix,allowed=1,limited=0",
		"class_other": "kind=other,allowed=1,limited=0",
	} {
		if ci[k] != want {
			t.Errorf("INFO classes %s = %q, want %q", k, ci[k], want)
		}
	}
	ri := info("rls")
	for k, want := range map[string]string{
		"rls_requests": "3", "rls_over_limit": "1", "rls_stats_limit": "1000", "rls_descriptors": "1",
		"descriptor_0": `domain="app",descriptor="user",total_hits=3,over_limit=1,near_limit=1,shadow_over_limit=0`,
	} {
		if ri[k] != want {
			t.Errorf("INFO rls %s = %q, want %q", k, ri[k], want)
		}
	}

	mf := scrapeMetrics(t, maddr)
	for _, tt := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"cellserver_class_decisions_total", []string{"class", "vip", "outcome", "limited"}, 2},
		{"cellserver_class_decisions_total", []string{"class", "user", "outcome", "allowed"}, 1},
		{"cellserver_class_decisions_total", []string{"class", "other", "outcome", "allowed"}, 1},
		{"cellserver_rls_descriptor_hits_total", []string{"domain", "app", "descriptor", "user"}, 3},
		{"cellserver_rls_descriptor_over_limit_total", []string{"domain", "app", "descriptor", "user"}, 1},
		{"cellserver_rls_descriptor_near_limit_total", []string{"domain", "app", "descriptor", "user"}, 1},
		{"cellserver_rls_descriptor_shadow_over_limit_total", []string{"domain", "app", "descriptor", "user"}, 0},
	} {
		if got := counterOf(mf, tt.name, tt.labels...); got != tt.want {
			t.Errorf("%s%v = %v, want %v", tt.name, tt.labels, got, tt.want)
		}
	}
	if n := len(mf["cellserver_class_decisions_total"].GetMetric()); n != 2*4 {
		t.Errorf("%d class series, want 8 (vip, user, ip, other × allowed, limited)", n)
	}

	// Live: a new class for orders; the others keep their counts.
	if err := c.ConfigSet(ctx, "metrics-class", "vip vip:* orders order:*").Err(); err != nil {
		t.Fatal(err)
	}
	throttle("order:2", 1)
	ci = info("classes")
	if ci["class_orders"] != "kind=rule,allowed=1,limited=0" || ci["class_vip"] != "kind=rule,allowed=1,limited=2" {
		t.Errorf("after CONFIG SET metrics-class: orders %q, vip %q", ci["class_orders"], ci["class_vip"])
	}

	// The service's keys are heavy hitters too: a user limited through
	// Envoy is listed by LIMITER TOP LIMITED under the command rls (one
	// decision in 32 is sampled, so 640 calls give about 20 samples).
	for range 640 {
		shouldRateLimit(t, rc, "bob")
	}
	top, err := c.Do(ctx, "LIMITER", "TOP", "LIMITED", "COUNT", 5).Slice()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range top {
		f := e.([]any)
		if key, cmd := f[0].(string), f[1].(string); cmd == "rls" && strings.HasSuffix(key, "app_user_bob") {
			found = true
		}
	}
	if !found {
		t.Errorf("LIMITER TOP LIMITED = %v, want the service's key for user bob under rls", top)
	}
	s.stop()
}
