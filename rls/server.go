package rls

import (
	"context"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// NewGRPCServer returns a gRPC server answering RateLimitService with s, and
// the standard health service (grpc.health.v1), which reports SERVING.
// opts are passed to grpc.NewServer (TLS credentials, for instance). The
// caller serves it on its listener and stops it (GracefulStop).
func NewGRPCServer(s *Service, opts ...grpc.ServerOption) *grpc.Server {
	gs := grpc.NewServer(opts...)
	pb.RegisterRateLimitServiceServer(gs, s)
	hs := health.NewServer()
	hs.SetServingStatus(pb.RateLimitService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(gs, hs)
	return gs
}

// Watch checks the configuration directory every interval (a second is a
// good choice) and reloads it when a configuration file was added, removed
// or changed (name, size or modification time) since the last load attempt
// and then held still for one interval (a file being written is not loaded
// half-written). A refused configuration is logged and not retried until the
// files change again. Watch returns when ctx ends.
func (s *Service) Watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.reloadIfChanged()
		}
	}
}
