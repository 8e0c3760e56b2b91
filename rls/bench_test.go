package rls

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/resp"
	"github.com/cellserver/cellserver/shards"
)

// BenchmarkDecisions answers: how many rate-limit decisions per second does
// Envoy's gRPC API (ShouldRateLimit over loopback, the generated client)
// get, against the same GCRA decisions asked over RESP (CL.THROTTLE with
// go-redis), on the same keyspace in the same run? Each goroutine limits
// its own key at a rate it never reaches, so every call decides and
// allows. Both report calls/s.
func BenchmarkDecisions(b *testing.B) {
	store, err := shards.New(shards.Config{})
	if err != nil {
		b.Fatal(err)
	}
	now := func() int64 { return time.Now().UnixNano() }
	backend := decide.NewLocal(store, now)

	dir := b.TempDir()
	writeFile(b, dir, "bench.yaml", "domain: bench\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 1000000000}\n")
	svc := New(Options{Writer: backend})
	if err := svc.Load(dir); err != nil {
		b.Fatal(err)
	}
	client := serve(b, svc)
	addr := serveRESP(b, backend)
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64})
	b.Cleanup(func() { rdb.Close() })

	var worker atomic.Int64
	b.Run("grpc-ShouldRateLimit", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			req := request("bench", desc("user", "g"+strconv.FormatInt(worker.Add(1), 10)))
			for pb.Next() {
				r, err := client.ShouldRateLimit(context.Background(), req)
				if err != nil || r.OverallCode != ok {
					b.Errorf("ShouldRateLimit = %v, %v", r, err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	})
	b.Run("resp-CL.THROTTLE", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			key := "r" + strconv.FormatInt(worker.Add(1), 10)
			for pb.Next() {
				v, err := rdb.Do(context.Background(), "CL.THROTTLE", key, 999999999, 1000000000, 1).Int64Slice()
				if err != nil || v[0] != 0 {
					b.Errorf("CL.THROTTLE = %v, %v", v, err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	})
}

// serveRESP serves a RESP server over backend on a loopback port until the
// benchmark ends, and returns its address.
func serveRESP(b *testing.B, backend *decide.Local) string {
	b.Helper()
	cfg := resp.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Logger = slog.New(slog.DiscardHandler)
	srv, err := resp.NewServer(cfg, backend)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if err := <-done; err != nil && !errors.Is(err, resp.ErrServerClosed) {
			b.Error(fmt.Errorf("RESP Serve: %w", err))
		}
	})
	return ln.Addr().String()
}
