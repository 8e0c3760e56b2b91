package test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestNodeClient runs the Node front door's own tests with `node --test`
// against the real server, whose address they read from CELLSERVER_ADDR:
// clients/node/test (the Limiter, the Express middleware on a real app,
// fail open and closed on a closed port, the deny cache, the shared field
// table, docs/http.md's program) and examples/node/test (the example
// program as an operator runs it, and a flood on one key). scripts/test.sh
// installs the packages with npm ci.
func TestNodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed")
	}
	for _, need := range []struct{ dir, pkg string }{
		{"../clients/node", "ioredis"}, {"../clients/node", "express"},
		{"../examples/node", "express"}, {"../examples/node", "cellserver-limit"},
	} {
		if out, err := exec.Command(node, "-e", `require.resolve(process.argv[1], {paths: [process.argv[2]]})`, need.pkg, need.dir).CombinedOutput(); err != nil {
			t.Skipf("%s not installed in %s (scripts/test.sh runs npm ci there): %s", need.pkg, need.dir, strings.TrimSpace(string(out)))
		}
	}
	s := startServer(t)
	for _, dir := range []string{"../clients/node", "../examples/node"} {
		t.Run(strings.TrimPrefix(dir, "../"), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, "--test", "--test-timeout=60000", "test/")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "CELLSERVER_ADDR="+s.Addr)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("node --test %s/test: %v\n%s", dir, err, out)
			}
			// A suite skipped for want of the address would pass silently.
			if strings.Contains(string(out), "CELLSERVER_ADDR is not set") {
				t.Fatalf("node's tests did not see CELLSERVER_ADDR:\n%s", out)
			}
			t.Logf("node --test:\n%s", tail(string(out), 12))
		})
	}
}
