package test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/internal/testlog"
)

// readArchive returns the files of a docker-archive tar by name.
func readArchive(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = b
		}
	}
}

// The container image, built by scripts/image.sh with podman and saved:
// its entrypoint, non-root user, exposed ports and /data volume; the
// layer's /data is a directory that user owns; and the binary taken out of
// the image runs and answers CL.THROTTLE user:1 15 30 60 with 0 16 15 -1 2
// (a container is not started: it may not be allowed where tests run).
func TestContainerImage(t *testing.T) {
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("podman not installed (scripts/test.sh installs it)")
	}
	dir := t.TempDir()
	saved := filepath.Join(dir, "image.tar")
	build := exec.Command("../scripts/image.sh")
	build.Env = append(os.Environ(), "IMAGE=cellserver-test:latest", "SAVE="+saved,
		"PODMAN_FLAGS=--storage-driver vfs --root "+filepath.Join(dir, "root")+" --runroot "+filepath.Join(dir, "run"))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("scripts/image.sh: %v\n%s", err, out)
	}
	files := readArchive(t, saved)
	var manifest []struct {
		Config string
		Layers []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json: %v (%d images)", err, len(manifest))
	}
	var cfg struct {
		Config struct {
			Entrypoint   []string
			Cmd          []string
			User         string
			ExposedPorts map[string]struct{}
			Volumes      map[string]struct{}
		} `json:"config"`
		Architecture string `json:"architecture"`
	}
	if err := json.Unmarshal(files[manifest[0].Config], &cfg); err != nil {
		t.Fatalf("image config: %v", err)
	}
	c := cfg.Config
	if !slices.Equal(c.Entrypoint, []string{"/cellserver"}) {
		t.Errorf("entrypoint %q, want [/cellserver]", c.Entrypoint)
	}
	if c.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (not root)", c.User)
	}
	for _, p := range []string{"6379/tcp", "7000/tcp", "9121/tcp"} {
		if _, ok := c.ExposedPorts[p]; !ok {
			t.Errorf("port %s not exposed (exposed: %v)", p, c.ExposedPorts)
		}
	}
	if _, ok := c.Volumes["/data"]; !ok || len(c.Volumes) != 1 {
		t.Errorf("volumes %v, want /data", c.Volumes)
	}
	if !slices.Contains(c.Cmd, "/data") {
		t.Errorf("cmd %q does not put the data in /data", c.Cmd)
	}

	// The layers: the binary, and /data owned by the user.
	var bin []byte
	dataOwned := false
	for _, l := range manifest[0].Layers {
		tr := tar.NewReader(bytes.NewReader(files[l]))
		for {
			h, err := tr.Next()
			if err != nil {
				break
			}
			switch filepath.Clean("/" + h.Name) {
			case "/cellserver":
				bin, _ = io.ReadAll(tr)
			case "/data":
				dataOwned = h.Typeflag == tar.TypeDir && h.Uid == 65532 && h.Gid == 65532
			}
		}
	}
	if !dataOwned {
		t.Error("the image's /data is not a directory owned by 65532:65532")
	}
	if len(bin) == 0 {
		t.Fatal("no /cellserver in the image's layers")
	}
	exe := filepath.Join(dir, "cellserver")
	if err := os.WriteFile(exe, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(exe, "--version").Output(); err != nil || len(out) < len("cellserver 0.0.0") {
		t.Errorf("cellserver --version from the image = %q, %v", out, err)
	}
	port := freePort(t)
	srv := exec.Command(exe, "--port", strconv.Itoa(port), "--dir", t.TempDir(), "--save", "")
	out := &testlog.Buffer{}
	srv.Stdout, srv.Stderr = out, out
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), MaxRetries: -1})
	t.Cleanup(func() { rc.Close() })
	poll.Until(t, 15*time.Second, func() error {
		if err := rc.Ping(ctxT(t)).Err(); err != nil {
			return fmt.Errorf("PING: %v\n%s", err, out)
		}
		return nil
	})
	got, err := rc.Do(ctxT(t), "CL.THROTTLE", "user:1", "15", "30", "60").Int64Slice()
	if want := []int64{0, 16, 15, -1, 2}; err != nil || !slices.Equal(got, want) {
		t.Errorf("CL.THROTTLE user:1 15 30 60 on the image's binary = %v, %v; want %v", got, err, want)
	}
}
