package metrics

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/internal/keyclass"
	"github.com/cellserver/cellserver/resp"
	"github.com/cellserver/cellserver/rls"
	"github.com/cellserver/cellserver/shards"
	"github.com/cellserver/cellserver/snapshot"
)

// fakePersistence answers fixed persistence figures.
type fakePersistence snapshot.Stats

func (f fakePersistence) Stats() snapshot.Stats { return snapshot.Stats(f) }

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// scrape fetches url and parses the text exposition format.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, res.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mf, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return mf
}

// value returns the value of the sample of family name whose labels
// include want, and whether there is one.
func value(mf map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := mf[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		for k, v := range want {
			found := false
			for _, lp := range m.Label {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// TestScrape runs a RESP server, sends commands, scrapes /metrics over
// HTTP and checks the figures against what was sent.
func TestScrape(t *testing.T) {
	store, err := shards.New(shards.Config{Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	cfg := resp.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Logger = discard()
	cfg.MaxClients = 3
	cfg.MetricsClasses = keyclass.Rules{{Name: "hot", Pattern: "hot"}}
	now := func() int64 { return time.Now().UnixNano() }
	srv, err := resp.NewServer(cfg, decide.NewLocal(store, now))
	if err != nil {
		t.Fatal(err)
	}
	ln := serve(t, srv)

	persist := fakePersistence{
		ChangesSinceLastSave: 7, LastSave: time.Unix(1700000000, 0), LastSaveOK: true, Saves: 3,
		LastSaveDuration: 250 * time.Millisecond, LastSaveKeys: 5, LastSaveBytes: 4096,
	}
	rlsStats := fakeRLS{Requests: 9, OverLimit: 2, ShadowOverLimit: 1, Errors: 3, Reloads: 4, ReloadErrors: 1, Forwarded: 6, Redirected: 5, Undecided: 7,
		Descriptors: []rls.DescriptorStats{{Domain: "web", Descriptor: "user", TotalHits: 8, OverLimit: 3, NearLimit: 2, ShadowOverLimit: 1}}}
	reg := NewRegistry(Sources{Server: srv, Store: store, Persistence: persist, RLS: rlsStats})
	h, err := Listen("127.0.0.1:0", reg, nil, discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(context.Background()); err != nil {
			t.Errorf("metrics Close: %v", err)
		}
	})

	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), Protocol: 2, PoolSize: 1})
	t.Cleanup(func() { c.Close() })
	// CL.THROTTLE with burst 2 (limit 3): 3 allowed, then 2 limited.
	for i := 0; i < 5; i++ {
		if err := c.Do(ctx, "CL.THROTTLE", "user", "2", "1", "60").Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 4; i++ {
		if err := c.Do(ctx, "TB.TAKE", "tb:"+string(rune('a'+i)), "5", "1", "1s").Err(); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.Do(ctx, "CL.THROTTLE", "user", "-1", "1", "60").Err() // error: negative burst
	_ = c.Do(ctx, "CL.THROTTLE", "user").Err()                  // rejected: arity
	if err := c.Do(ctx, "AUTH", "nobody", "guess").Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") {
		t.Fatalf("AUTH nobody guess = %v, want WRONGPASS", err)
	}
	// Fill maxclients (3): the pool's connection plus two more; a fourth
	// is refused.
	var extra []net.Conn
	for i := 0; i < 3; i++ {
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		extra = append(extra, nc)
		t.Cleanup(func() { nc.Close() })
	}
	buf := make([]byte, 64)
	_ = extra[2].SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, _ := extra[2].Read(buf); string(buf[:n]) != "-ERR max number of clients reached\r\n" {
		t.Fatalf("fourth client got %q, want -ERR max number of clients reached", buf[:n])
	}

	mf := scrape(t, "http://"+h.Addr().String()+"/metrics")
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"cellserver_commands_total", map[string]string{"cmd": "cl.throttle", "outcome": "allowed"}, 3},
		{"cellserver_commands_total", map[string]string{"cmd": "cl.throttle", "outcome": "limited"}, 2},
		{"cellserver_commands_total", map[string]string{"cmd": "cl.throttle", "outcome": "error"}, 1},
		{"cellserver_commands_total", map[string]string{"cmd": "cl.throttle", "outcome": "rejected"}, 1},
		{"cellserver_commands_total", map[string]string{"cmd": "tb.take", "outcome": "allowed"}, 4},
		{"cellserver_command_duration_seconds", map[string]string{"cmd": "cl.throttle"}, 6}, // 5 + the one that failed
		{"cellserver_keys", map[string]string{"kind": "gcra"}, 1},
		{"cellserver_keys", map[string]string{"kind": "token-bucket"}, 4},
		{"cellserver_connections_rejected_total", nil, 1},
		{"cellserver_connected_clients", nil, 3},
		{"cellserver_error_replies_total", nil, 3}, // the error, the arity error and WRONGPASS (a refused client is counted apart, as in Redis)
		{"cellserver_auth_failures_total", nil, 1},
		{"cellserver_clients_closed_total", map[string]string{"reason": "auth_failures"}, 0},
		{"cellserver_clients_closed_total", map[string]string{"reason": "output_buffer"}, 0},
		{"cellserver_clients_closed_total", map[string]string{"reason": "maxmemory_clients"}, 0},
		{"cellserver_maxmemory_clients_bytes", nil, 1 << 30}, // auto without maxmemory
		{"cellserver_protected_mode_rejected_connections_total", nil, 0},
		{"cellserver_snapshot_saves_total", nil, 3},
		{"cellserver_snapshot_last_duration_seconds", nil, 0.25},
		{"cellserver_snapshot_changes_since_last_save", nil, 7},
		{"cellserver_snapshot_last_status_ok", nil, 1},
		{"cellserver_snapshot_in_progress", nil, 0},
		{"cellserver_snapshot_last_success_timestamp_seconds", nil, 1700000000},
		{"cellserver_snapshot_last_keys", nil, 5},
		{"cellserver_snapshot_last_bytes", nil, 4096},
		{"cellserver_build_info", map[string]string{"version": resp.Version}, 1},
		{"cellserver_rls_requests_total", nil, 9},
		{"cellserver_rls_over_limit_total", nil, 2},
		{"cellserver_rls_shadow_over_limit_total", nil, 1},
		{"cellserver_rls_errors_total", nil, 3},
		{"cellserver_rls_config_loads_total", map[string]string{"outcome": "ok"}, 4},
		{"cellserver_rls_config_loads_total", map[string]string{"outcome": "refused"}, 1},
		{"cellserver_rls_forwarded_descriptors_total", nil, 6},
		{"cellserver_rls_redirected_descriptors_total", nil, 5},
		{"cellserver_rls_undecided_descriptors_total", nil, 7},
		{"cellserver_rls_descriptor_hits_total", map[string]string{"domain": "web", "descriptor": "user"}, 8},
		{"cellserver_rls_descriptor_over_limit_total", map[string]string{"domain": "web", "descriptor": "user"}, 3},
		{"cellserver_rls_descriptor_near_limit_total", map[string]string{"domain": "web", "descriptor": "user"}, 2},
		{"cellserver_rls_descriptor_shadow_over_limit_total", map[string]string{"domain": "web", "descriptor": "user"}, 1},
		// Key classes: "user" has no prefix (other), tb:a... are class tb.
		{"cellserver_class_decisions_total", map[string]string{"class": "other", "outcome": "allowed"}, 3},
		{"cellserver_class_decisions_total", map[string]string{"class": "other", "outcome": "limited"}, 2},
		{"cellserver_class_decisions_total", map[string]string{"class": "tb", "outcome": "allowed"}, 4},
		{"cellserver_class_decisions_total", map[string]string{"class": "hot", "outcome": "allowed"}, 0},
	}
	for _, tt := range tests {
		got, ok := value(mf, tt.name, tt.labels)
		if !ok || got != tt.want {
			t.Errorf("%s%v = %v (present %v), want %v", tt.name, tt.labels, got, ok, tt.want)
		}
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "process_resident_memory_bytes", "process_open_fds"} {
		if _, ok := mf[name]; !ok {
			t.Errorf("%s missing, want the Go and process collectors' metrics", name)
		}
	}
	if _, ok := mf["cellserver_raft_term"]; ok {
		t.Error("cellserver_raft_term present on a standalone server, want no raft metrics")
	}
	// The histogram's buckets are cumulative and end with every call.
	var hist *dto.Histogram
	for _, m := range mf["cellserver_command_duration_seconds"].Metric {
		for _, lp := range m.Label {
			if lp.GetValue() == "cl.throttle" {
				hist = m.Histogram
			}
		}
	}
	if hist == nil {
		t.Fatal("cellserver_command_duration_seconds{cmd=cl.throttle} missing")
	}
	var prev uint64
	for _, b := range hist.Bucket {
		if b.GetCumulativeCount() < prev {
			t.Errorf("bucket le=%v count %d below the previous %d", b.GetUpperBound(), b.GetCumulativeCount(), prev)
		}
		prev = b.GetCumulativeCount()
	}
	if prev > hist.GetSampleCount() || hist.GetSampleSum() <= 0 {
		t.Errorf("histogram: last bucket %d, count %d, sum %v; want last bucket <= count and sum > 0", prev, hist.GetSampleCount(), hist.GetSampleSum())
	}

	// The heavy hitters: 6400 requests on one key (one in 32 sampled:
	// about 200 samples) show it as the top requested key, and the series
	// stay bounded (10 per list).
	p := c.Pipeline()
	for range 6400 {
		p.Do(ctx, "CL.THROTTLE", "hot", "1000000", "1", "60")
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	mf = scrape(t, "http://"+h.Addr().String()+"/metrics")
	got, ok := value(mf, "cellserver_hotkey_count", map[string]string{"list": "requested", "cmd": "cl.throttle", "key": "hot"})
	if !ok || got < 3200 || got > 12800 {
		t.Errorf("cellserver_hotkey_count{requested,cl.throttle,hot} = %v (present %v), want about 6400", got, ok)
	}
	if n := len(mf["cellserver_hotkey_count"].GetMetric()); n > 20 {
		t.Errorf("%d cellserver_hotkey_count series, want at most 20", n)
	}
	if got, _ := value(mf, "cellserver_class_decisions_total", map[string]string{"class": "hot", "outcome": "allowed"}); got != 6400 {
		t.Errorf("cellserver_class_decisions_total{hot,allowed} = %v, want 6400 (every decision counted)", got)
	}
}

// fakeRLS stands for the rate-limit service's counters.
type fakeRLS rls.Stats

func (f fakeRLS) Stats() rls.Stats { return rls.Stats(f) }

// serve serves srv on a loopback port until the test ends, and returns
// its listener.
func serve(t *testing.T, srv *resp.Server) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; !errors.Is(err, resp.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln
}
