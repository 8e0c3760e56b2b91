package test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/cellserver/cellserver/internal/poll"
)

// rlsRules writes a rules file for domain "app": user=<any> at rpu per
// minute, named "per_user".
func rlsRules(t *testing.T, dir string, rpu int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	y := fmt.Sprintf("domain: app\ndescriptors:\n  - key: user\n    rate_limit: {name: per_user, unit: minute, requests_per_unit: %d}\n", rpu)
	if err := os.WriteFile(filepath.Join(dir, "app.yaml"), []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
}

// rlsClient connects the generated client to a plaintext rate-limit port.
func rlsClient(t *testing.T, port int) pb.RateLimitServiceClient {
	t.Helper()
	conn, err := grpc.NewClient("127.0.0.1:"+strconv.Itoa(port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewRateLimitServiceClient(conn)
}

// shouldRateLimit asks for user's descriptor in domain app, retrying while
// the port is not yet up.
func shouldRateLimit(t *testing.T, c pb.RateLimitServiceClient, user string) *pb.RateLimitResponse {
	t.Helper()
	req := &pb.RateLimitRequest{Domain: "app", Descriptors: []*rlpb.RateLimitDescriptor{
		{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "user", Value: user}}},
	}}
	var r *pb.RateLimitResponse
	poll.Until(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		r, err = c.ShouldRateLimit(ctx, req, grpc.WaitForReady(true))
		return err
	})
	return r
}

// TestRLSEndToEnd: the real binary serves Envoy's rate-limit API with
// --rls-port on the keyspace RESP sees; CONFIG SET rls-config refuses a bad
// directory and switches to a good one; SIGHUP reloads; SIGTERM stops it
// cleanly.
func TestRLSEndToEnd(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules")
	rlsRules(t, rules, 2)
	port := freePort(t)
	s := startServer(t, "--rls-port", strconv.Itoa(port), "--rls-config", rules, "--rls-response-headers", "legacy")
	c := rlsClient(t, port)
	rdb := s.client(t, 2)
	ctx := ctxT(t)

	for i, want := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT} {
		r := shouldRateLimit(t, c, "alice")
		if r.OverallCode != want || r.Statuses[0].CurrentLimit.GetName() != "per_user" {
			t.Fatalf("call %d = %v; want %v under per_user", i+1, r, want)
		}
		if i == 2 && len(r.ResponseHeadersToAdd) == 0 {
			t.Errorf("call 3 has no response headers with rls-response-headers legacy")
		}
	}
	// The decision lives in the keyspace RESP serves.
	keys, err := rdb.Keys(ctx, "rls:*").Result()
	if err != nil || len(keys) != 1 || keys[0] != "rls:gcra:app_user_alice" {
		t.Fatalf("KEYS rls:* = %v, %v; want [rls:gcra:app_user_alice]", keys, err)
	}
	if typ, _ := rdb.Type(ctx, keys[0]).Result(); typ != "gcra" {
		t.Errorf("TYPE %s = %q, want gcra", keys[0], typ)
	}

	// CONFIG SET: a bad directory is refused, the rules stay.
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.MkdirAll(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, "x.yaml"), []byte("domain: app\ndescriptors:\n  - key: user\n    rate_limit: {unit: lightyear, requests_per_unit: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "rls-config", bad).Err(); err == nil || !strings.Contains(err.Error(), "lightyear") {
		t.Fatalf("CONFIG SET rls-config <bad> = %v; want an error naming the unit", err)
	}
	if got, _ := rdb.ConfigGet(ctx, "rls-config").Result(); got["rls-config"] != rules {
		t.Errorf("CONFIG GET rls-config after a refused SET = %v, want %s", got, rules)
	}
	if r := shouldRateLimit(t, c, "bob"); r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 2 {
		t.Fatalf("after a refused CONFIG SET = %v; want the old limit 2", r)
	}
	other := filepath.Join(t.TempDir(), "other")
	rlsRules(t, other, 5)
	if err := rdb.ConfigSet(ctx, "rls-config", other).Err(); err != nil {
		t.Fatal(err)
	}
	if r := shouldRateLimit(t, c, "bob"); r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 5 {
		t.Fatalf("after CONFIG SET = %v; want limit 5", r)
	}

	// SIGHUP reloads (the file watcher may get there first; either way the
	// server keeps running and the new rules apply).
	rlsRules(t, other, 9)
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, func() error {
		s.failIfExited()
		if got := shouldRateLimit(t, c, "carol").Statuses[0].CurrentLimit.GetRequestsPerUnit(); got != 9 {
			return fmt.Errorf("limit %d after SIGHUP, want 9", got)
		}
		return nil
	})
	s.stop()
}

// TestRLSCluster: in a three-node cluster every node serves the rate-limit
// API, and a decision taken through one node is replicated: the others see
// the same counter.
func TestRLSCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes")
	}
	rules := filepath.Join(t.TempDir(), "rules")
	rlsRules(t, rules, 2)
	ports := []int{freePort(t), freePort(t), freePort(t)}
	rlsArgs := func(i int) []string {
		return []string{"--rls-port", strconv.Itoa(ports[i]), "--rls-config", rules}
	}
	nodes := []*clusterNode{startClusterNode(t, "n1", "", rlsArgs(0)...)}
	poll.Until(t, 15*time.Second, func() error {
		if raftInfo(nodes[0])["raft_ready"] != "1" {
			return fmt.Errorf("n1 not leader yet")
		}
		return nil
	})
	for i := 1; i < 3; i++ {
		nodes = append(nodes, startClusterNode(t, "n"+strconv.Itoa(i+1), nodes[0].Addr, rlsArgs(i)...))
	}
	waitMembers(t, nodes, 3)

	for i, want := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT} {
		r := shouldRateLimit(t, rlsClient(t, ports[i]), "dave")
		if r.OverallCode != want {
			t.Fatalf("call %d through n%d = %v; want %v", i+1, i+1, r, want)
		}
	}
}

// TestRLSTLS: with tls-port set the rate-limit port speaks TLS with the
// server's certificate and client-certificate policy: a client with a
// certificate from the CA is served, one without is refused, and so is
// plaintext.
func TestRLSTLS(t *testing.T) {
	pki := newTestPKI(t)
	rules := filepath.Join(t.TempDir(), "rules")
	rlsRules(t, rules, 2)
	port := freePort(t)
	startServer(t, "--tls-port", strconv.Itoa(freePort(t)), "--tls-cert-file", pki.ServerCert,
		"--tls-key-file", pki.ServerKey, "--tls-ca-cert-file", pki.CAFile, "--tls-auth-clients", "yes",
		"--rls-port", strconv.Itoa(port), "--rls-config", rules)
	dial := func(opt grpc.DialOption) pb.RateLimitServiceClient {
		conn, err := grpc.NewClient("127.0.0.1:"+strconv.Itoa(port), opt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return pb.NewRateLimitServiceClient(conn)
	}
	if r := shouldRateLimit(t, dial(grpc.WithTransportCredentials(credentials.NewTLS(pki.clientConfig(t, true)))), "erin"); r.OverallCode != pb.RateLimitResponse_OK {
		t.Fatalf("over mutual TLS = %v; want OK", r)
	}
	req := &pb.RateLimitRequest{Domain: "app", Descriptors: []*rlpb.RateLimitDescriptor{{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "user", Value: "x"}}}}}
	for name, opt := range map[string]grpc.DialOption{
		"no client certificate": grpc.WithTransportCredentials(credentials.NewTLS(pki.clientConfig(t, false))),
		"plaintext":             grpc.WithTransportCredentials(insecure.NewCredentials()),
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r, err := dial(opt).ShouldRateLimit(ctx, req)
		cancel()
		if status.Code(err) != codes.Unavailable {
			t.Errorf("%s: ShouldRateLimit = %v, %v; want Unavailable", name, r, err)
		}
	}
}

// TestRLSMaxMemory: under maxmemory-policy noeviction, once the keyspace is
// over maxmemory the rate-limit service refuses to create keys, as the
// limiter commands do.
func TestRLSMaxMemory(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules")
	rlsRules(t, rules, 2)
	port := freePort(t)
	s := startServer(t, "--maxmemory", "1", "--maxmemory-policy", "noeviction", "--rls-port", strconv.Itoa(port), "--rls-config", rules)
	c := rlsClient(t, port)
	rdb := s.client(t, 2)
	if _, err := throttle(ctxT(t), rdb, "filler", 1, 1, 60); err != nil {
		t.Fatalf("first key under maxmemory: %v", err)
	}
	attempt := 0
	poll.Until(t, 30*time.Second, func() error {
		attempt++ // a new user each time: a new key
		req := &pb.RateLimitRequest{Domain: "app", Descriptors: []*rlpb.RateLimitDescriptor{{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "user", Value: "u" + strconv.Itoa(attempt)}}}}}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := c.ShouldRateLimit(ctx, req, grpc.WaitForReady(true))
		if status.Code(err) != codes.ResourceExhausted {
			return fmt.Errorf("ShouldRateLimit over maxmemory = %v, %v; want ResourceExhausted", r, err)
		}
		return nil
	})
}
