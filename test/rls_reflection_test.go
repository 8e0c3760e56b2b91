package test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

const rateLimitService = "envoy.service.ratelimit.v3.RateLimitService"

// reflect runs one request on a new server reflection stream.
func reflect(t *testing.T, port int, req *rpb.ServerReflectionRequest) (*rpb.ServerReflectionResponse, error) {
	t.Helper()
	conn, err := grpc.NewClient("127.0.0.1:"+strconv.Itoa(port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := rpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx, grpc.WaitForReady(true))
	if err != nil {
		return nil, err
	}
	if err := stream.Send(req); err != nil {
		_, err = stream.Recv() // Send reports only io.EOF; Recv has the status
		return nil, err
	}
	return stream.Recv()
}

// TestRLSReflection: with --rls-reflection yes the rate-limit port answers
// gRPC server reflection (what grpcurl uses): it lists the rate-limit and
// health services and describes RateLimitService.ShouldRateLimit; without
// it, reflection is not served.
func TestRLSReflection(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules")
	rlsRules(t, rules, 2)

	t.Run("off by default", func(t *testing.T) {
		port := freePort(t)
		startServer(t, "--rls-port", strconv.Itoa(port), "--rls-config", rules)
		shouldRateLimit(t, rlsClient(t, port), "u") // the port is up
		_, err := reflect(t, port, &rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}})
		if status.Code(err) != codes.Unimplemented {
			t.Fatalf("reflection without rls-reflection: %v, want Unimplemented", err)
		}
	})

	port := freePort(t)
	startServer(t, "--rls-port", strconv.Itoa(port), "--rls-config", rules, "--rls-reflection", "yes")
	shouldRateLimit(t, rlsClient(t, port), "u")

	r, err := reflect(t, port, &rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}})
	if err != nil {
		t.Fatalf("list services: %v", err)
	}
	var names []string
	for _, s := range r.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{rateLimitService, "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if !slices.Contains(names, want) {
			t.Errorf("services %v lack %s", names, want)
		}
	}

	r, err = reflect(t, port, &rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: rateLimitService}})
	if err != nil {
		t.Fatalf("describe %s: %v", rateLimitService, err)
	}
	found := false
	for _, raw := range r.GetFileDescriptorResponse().GetFileDescriptorProto() {
		var fd descriptorpb.FileDescriptorProto
		if err := proto.Unmarshal(raw, &fd); err != nil {
			t.Fatal(err)
		}
		for _, svc := range fd.GetService() {
			if fd.GetPackage()+"."+svc.GetName() != rateLimitService {
				continue
			}
			for _, m := range svc.GetMethod() {
				if m.GetName() == "ShouldRateLimit" && m.GetInputType() == ".envoy.service.ratelimit.v3.RateLimitRequest" {
					found = true
				}
			}
		}
	}
	if !found {
		t.Fatalf("reflection does not describe %s.ShouldRateLimit(RateLimitRequest)", rateLimitService)
	}

	// grpcurl, where installed ($GRPCURL: scripts/test.sh installs it).
	grpcurl := os.Getenv("GRPCURL")
	if grpcurl == "" {
		var err error
		if grpcurl, err = exec.LookPath("grpcurl"); err != nil {
			t.Log("grpcurl not installed: checked through the reflection client only")
			return
		}
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	out, err := exec.Command(grpcurl, "-plaintext", addr, "list").CombinedOutput()
	if err != nil || !strings.Contains(string(out), rateLimitService) {
		t.Errorf("grpcurl list: %v\n%s", err, out)
	}
	out, err = exec.Command(grpcurl, "-plaintext", "-d", `{"domain":"app","descriptors":[{"entries":[{"key":"user","value":"alice"}]}]}`,
		addr, rateLimitService+"/ShouldRateLimit").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"overallCode": "OK"`) {
		t.Errorf("grpcurl ShouldRateLimit: %v\n%s", err, out)
	}
}
