package resp

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/shards"
	"github.com/cellserver/cellserver/snapshot"
)

// TestPersistenceCommands wires the real snapshot.Persister in: SAVE writes
// the file, BGSAVE starts, INFO persistence shows its fields, SHUTDOWN saves
// by default before closing.
func TestPersistenceCommands(t *testing.T) {
	dir := t.TempDir()
	var p *snapshot.Persister
	ts := startServerWith(t, func(c *Config, store *shards.Store, clock *fakeClock) {
		var err error
		p, err = snapshot.Open(snapshot.Config{Dir: dir, DBFilename: "test.snap"}, store, clock.Now, discardLogger())
		if err != nil {
			t.Fatal(err)
		}
		c.Persistence = p
	})
	rc := ts.raw(t)
	rc.send(t, "CL.THROTTLE k 15 30 60\r\n")
	for i := 0; i < 6; i++ {
		rc.line(t)
	}
	rc.send(t, "SAVE\r\n")
	if got := rc.line(t); got != "+OK" {
		t.Fatalf("SAVE = %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "test.snap")); err != nil {
		t.Fatalf("after SAVE: %v", err)
	}
	rc.send(t, "LASTSAVE\r\n")
	if got := rc.line(t); got == ":0" || !strings.HasPrefix(got, ":") {
		t.Errorf("LASTSAVE = %q, want the save's time", got)
	}
	rc.send(t, "BGSAVE\r\n")
	if got := rc.line(t); got != "+Background saving started" && !strings.Contains(got, "in progress") {
		t.Errorf("BGSAVE = %q", got)
	}
	// Polled under the persister's lock rather than p.Wait(): BGSAVE's
	// WaitGroup.Add ran on a server goroutine the test has no
	// happens-before edge with (the reply came over TCP).
	poll.Until(t, 10*time.Second, func() error {
		if p.Stats().BGSaveInProgress {
			return errors.New("background save still running")
		}
		return nil
	})
	rc.send(t, "INFO persistence\r\n")
	var n int
	if _, err := fmt.Sscanf(rc.line(t), "$%d", &n); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, n+2)
	if _, err := io.ReadFull(rc.r, body); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(body), "# Persistence\r\n") || !strings.Contains(string(body), "rdb_last_bgsave_status") {
		t.Errorf("INFO persistence = %q", body)
	}
	if err := os.Remove(filepath.Join(dir, "test.snap")); err != nil {
		t.Fatal(err)
	}
	rc.send(t, "SHUTDOWN\r\n")
	rc.expectClosed(t)
	select {
	case <-ts.srv.ShutdownRequested():
	case <-time.After(5 * time.Second):
		t.Fatal("ShutdownRequested not closed")
	}
	if _, err := os.Stat(filepath.Join(dir, "test.snap")); err != nil {
		t.Errorf("SHUTDOWN did not save: %v", err)
	}
}
