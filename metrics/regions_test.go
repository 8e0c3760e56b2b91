package metrics

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/region"
	"github.com/cellserver/cellserver/shards"
)

// TestRegionMetrics: a region whose peer cannot be reached shows it down,
// its global decision as a fallback, and its async consumption queued.
func TestRegionMetrics(t *testing.T) {
	store, err := shards.New(shards.Config{Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	now := func() int64 { return time.Now().UnixNano() }
	pol, _ := region.ParsePolicy(strings.Fields("g:* global eu a:* async"))
	g, err := region.New(region.Config{Name: "us", Peers: []region.PeerConfig{{Name: "eu", Addrs: []string{"127.0.0.1:1"}}},
		Timeout: time.Second, Policy: pol, Unreachable: region.UnreachableDeny, Logger: discard(), Now: now}, decide.NewLocal(store, now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	req := engine.Request{Kind: engine.KindFixedWindow, Burst: 10, Period: int64(time.Hour), Quantity: 1}
	ops := []shards.Op{
		{Code: shards.OpLimit, Keys: [][]byte{[]byte("g:1")}, Reqs: []engine.Request{req}},
		{Code: shards.OpLimit, Keys: [][]byte{[]byte("a:1")}, Reqs: []engine.Request{req}},
	}
	if err := g.Write(context.Background(), ops, make([]shards.Result, 2)); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newRegionCollector(g))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "," + l.GetName() + "=" + l.GetValue()
			}
			got[name] = v
		}
	}
	for name, want := range map[string]float64{
		"cellserver_region_async_queued_ops,peer=eu":          1,
		"cellserver_region_fallbacks_total":                   1,
		"cellserver_region_peer_up,peer=eu":                   0,
		"cellserver_region_peer_last_contact_seconds,peer=eu": -1,
		"cellserver_region_peer_failed_calls_total,peer=eu":   1,
		"cellserver_region_policy_mismatches_total,peer=eu":   0,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
}
