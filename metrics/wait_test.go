package metrics

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/resp"
	"github.com/cellserver/cellserver/shards"
)

// The waiting requests (WAIT) are a gauge while they wait, and their waits
// a histogram once answered.
func TestScrapeWaiting(t *testing.T) {
	store, err := shards.New(shards.Config{Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	cfg := resp.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Logger = discard()
	srv, err := resp.NewServer(cfg, decide.NewLocal(store, func() int64 { return time.Now().UnixNano() }))
	if err != nil {
		t.Fatal(err)
	}
	ln := serve(t, srv)
	h, err := Listen("127.0.0.1:0", NewRegistry(Sources{Server: srv, Store: store}), nil, discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	url := "http://" + h.Addr().String() + "/metrics"

	ctx := context.Background()
	rc := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), PoolSize: 4})
	t.Cleanup(func() { rc.Close() })
	// One request per 300 ms: the head now, a waiter 300 ms later.
	if err := rc.Do(ctx, "TB.TAKE", "m", 1, 1, "300ms").Err(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- rc.Do(ctx, "TB.TAKE", "m", 1, 1, "300ms", 1, "WAIT", "2s").Err() }()
	poll.Until(t, 5*time.Second, func() error {
		if v, _ := value(scrape(t, url), "cellserver_waiting_requests", nil); v != 1 {
			return fmt.Errorf("cellserver_waiting_requests = %v, want 1", v)
		}
		return nil
	})
	if err := <-done; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	mf := scrape(t, url)
	if v, _ := value(mf, "cellserver_waiting_requests", nil); v != 0 {
		t.Errorf("cellserver_waiting_requests = %v after the reply, want 0", v)
	}
	hist := mf["cellserver_wait_duration_seconds"]
	if hist == nil || len(hist.Metric) != 1 {
		t.Fatalf("cellserver_wait_duration_seconds missing: %v", hist)
	}
	hg := hist.Metric[0].GetHistogram()
	if hg.GetSampleCount() != 1 || hg.GetSampleSum() < 0.2 || hg.GetSampleSum() > 2 {
		t.Errorf("wait histogram: %d samples, sum %vs; want one wait of about 0.3s", hg.GetSampleCount(), hg.GetSampleSum())
	}
	for _, b := range hg.GetBucket() {
		if want := uint64(0); b.GetUpperBound() < 0.25 && b.GetCumulativeCount() != want {
			t.Errorf("bucket le=%v holds %d, want 0 (the wait was about 300ms)", b.GetUpperBound(), b.GetCumulativeCount())
		}
		if b.GetUpperBound() >= 2.5 && b.GetCumulativeCount() != 1 {
			t.Errorf("bucket le=%v holds %d, want 1", b.GetUpperBound(), b.GetCumulativeCount())
		}
	}
}
