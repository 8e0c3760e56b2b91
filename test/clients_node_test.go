package test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestNodeClient runs the Node front door's own tests (clients/node/test:
// the Limiter, the Express middleware on a real app, fail open and closed
// on a closed port, the deny cache and the shared field table) with
// `node --test` against the real server, whose address they read from
// CELLSERVER_ADDR. scripts/test.sh installs the packages with npm ci.
func TestNodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed")
	}
	for _, pkg := range []string{"ioredis", "express"} {
		if out, err := exec.Command(node, "-e", `require.resolve(process.argv[1], {paths: ["../clients/node"]})`, pkg).CombinedOutput(); err != nil {
			t.Skipf("%s not installed in clients/node (scripts/test.sh runs npm ci there): %s", pkg, strings.TrimSpace(string(out)))
		}
	}
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-timeout=60000", "test/")
	cmd.Dir = "../clients/node"
	cmd.Env = append(os.Environ(), "CELLSERVER_ADDR="+s.Addr)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test clients/node/test: %v\n%s", err, out)
	}
	// A suite skipped for want of the address would pass silently.
	if strings.Contains(string(out), "CELLSERVER_ADDR is not set") {
		t.Fatalf("node's tests did not see CELLSERVER_ADDR:\n%s", out)
	}
	t.Logf("node --test:\n%s", tail(string(out), 12))
}
