package test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A password read from --requirepass-file: AUTH with it works, no client
// is served without it, and the process's command line (what ps and
// /debug/pprof/cmdline show) holds the file's path, never the password.
// A file that cannot be read, or is empty, stops the start with an error
// naming it.
func TestRequirePassFile(t *testing.T) {
	dir := t.TempDir()
	pw := "pw-" + strconv.Itoa(os.Getpid()) + "-secret"
	file := filepath.Join(dir, "requirepass")
	if err := os.WriteFile(file, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "--requirepass-file", file)
	ctx := ctxT(t)
	anon := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer anon.Close()
	if err := anon.Ping(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Errorf("PING without AUTH = %v, want NOAUTH", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Password: pw, MaxRetries: -1})
	defer c.Close()
	if r, err := c.Do(ctx, "CL.THROTTLE", "user:file", "5", "5", "60").Int64Slice(); err != nil || len(r) != 5 || r[0] != 0 {
		t.Errorf("CL.THROTTLE after AUTH with the file's password = %v, %v; want allowed", r, err)
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(s.cmd.Process.Pid) + "/cmdline")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	if strings.Contains(string(cmdline), pw) || !strings.Contains(string(cmdline), file) {
		t.Errorf("command line %q: want the file's path and not the password", strings.ReplaceAll(string(cmdline), "\x00", " "))
	}

	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ flag, file, want string }{
		{"--requirepass-file", filepath.Join(dir, "missing"), "requirepass-file: cannot read the secret: open " + filepath.Join(dir, "missing")},
		{"--requirepass-file", empty, "requirepass-file " + empty + ": the file is empty"},
		{"--cluster-secret-file", filepath.Join(dir, "missing"), "cluster-secret-file: cannot read the secret: open " + filepath.Join(dir, "missing")},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, binary, "--port", strconv.Itoa(freePort(t)), "--dir", dir, tt.flag, tt.file).CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), tt.want) {
			t.Errorf("cellserver %s %s: %v\n%s\nwant an exit with %q", tt.flag, tt.file, err, out, tt.want)
		}
	}
}
