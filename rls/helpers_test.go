package rls

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/shards"
)

// epoch is the fake clock's start: a whole minute, hour and day of Unix
// time (2023-11-15 00:00:00 UTC), so fixed windows begin there.
const epoch = int64(1_700_006_400) * 1e9

// fakeClock is a clock a test moves by hand (Unix ns); safe for concurrent
// use.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(epoch)
	return c
}

func (c *fakeClock) Now() int64              { return c.ns.Load() }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// harness is a Service over a real keyspace, served on a loopback gRPC
// listener, and a generated client connected to it.
type harness struct {
	svc    *Service
	store  *shards.Store
	clock  *fakeClock
	client pb.RateLimitServiceClient
}

// newHarness serves a Service that loads dir ("" for none) with opt
// (Writer filled in: a decide.Local over a new keyspace at a fake clock).
func newHarness(t testing.TB, dir string, opt Options) *harness {
	t.Helper()
	store, err := shards.New(shards.Config{Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock()
	opt.Writer = decide.NewLocal(store, clock.Now)
	svc := New(opt)
	if err := svc.Load(dir); err != nil {
		t.Fatalf("Load(%q) = %v", dir, err)
	}
	return &harness{svc: svc, store: store, clock: clock, client: serve(t, svc)}
}

// serve serves svc on a loopback listener until the test ends and returns
// a client of it.
func serve(t testing.TB, svc *Service) pb.RateLimitServiceClient {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := NewGRPCServer(svc)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(ln)
	}()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		gs.Stop()
		<-done
	})
	return pb.NewRateLimitServiceClient(conn)
}

// call sends one request and fails the test on a transport or status error.
func (h *harness) call(t testing.TB, req *pb.RateLimitRequest) *pb.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := h.client.ShouldRateLimit(ctx, req)
	if err != nil {
		t.Fatalf("ShouldRateLimit(%v) = %v", req, err)
	}
	return r
}

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) *rlpb.RateLimitDescriptor {
	d := &rlpb.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlpb.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// request builds a request of domain with descriptors.
func request(domain string, ds ...*rlpb.RateLimitDescriptor) *pb.RateLimitRequest {
	return &pb.RateLimitRequest{Domain: domain, Descriptors: ds}
}

// writeFile writes content to dir/name, creating dir.
func writeFile(t testing.TB, dir, name, content string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
