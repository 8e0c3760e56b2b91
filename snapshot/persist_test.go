package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/shards"
)

// fakeClock is a settable clock (Unix ns), safe for concurrent use.
type fakeClock struct{ ns atomic.Int64 }

func newClock(ns int64) *fakeClock { c := &fakeClock{}; c.ns.Store(ns); return c }
func (c *fakeClock) now() int64    { return c.ns.Load() }
func (c *fakeClock) add(d int64)   { c.ns.Add(d) }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openP(t *testing.T, cfg Config, s *shards.Store, c *fakeClock) *Persister {
	t.Helper()
	p, err := Open(cfg, s, c.now, quietLogger())
	if err != nil {
		t.Fatalf("Open(%+v): %v", cfg, err)
	}
	t.Cleanup(p.Wait)
	return p
}

func info(p *Persister) map[string]string {
	m := map[string]string{}
	for _, kv := range p.InfoFields() {
		m[kv[0]] = kv[1]
	}
	return m
}

func wantInfo(t *testing.T, p *Persister, want map[string]string) {
	t.Helper()
	got := info(p)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("INFO %s = %q, want %q", k, got[k], v)
		}
	}
}

func cfgIn(dir string) Config {
	c := DefaultConfig()
	c.Dir = dir
	return c
}

func TestPersistSaveAndLoad(t *testing.T) {
	dir := t.TempDir()
	clk := newClock(t0)
	src := newStore(t, 16)
	p := openP(t, cfgIn(dir), src, clk)
	wantInfo(t, p, map[string]string{"rdb_last_load_keys_loaded": "0", "rdb_saves": "0", "rdb_changes_since_last_save": "0"})

	now := fillStore(t, src, rand.New(rand.NewPCG(8, 9)), 5000, 500, t0)
	clk.ns.Store(now)
	if got := info(p)["rdb_changes_since_last_save"]; got == "0" {
		t.Fatalf("rdb_changes_since_last_save = 0 after 5000 writes")
	}
	if err := p.Save(); err != nil {
		t.Fatalf("Save: %v", err)
	}
	want := dump(t, src, now)
	wantInfo(t, p, map[string]string{
		"rdb_saves": "1", "rdb_changes_since_last_save": "0", "rdb_last_bgsave_status": "ok",
		"rdb_last_save_keys": strconv.Itoa(len(want)), "rdb_last_save_error": "", "rdb_bgsave_in_progress": "0",
	})
	if p.LastSave() != now/1e9 {
		t.Fatalf("LastSave() = %d, want %d", p.LastSave(), now/1e9)
	}

	dst := newStore(t, 4)
	p2 := openP(t, cfgIn(dir), dst, clk)
	sameEntries(t, dump(t, dst, now), want)
	wantInfo(t, p2, map[string]string{"rdb_last_load_keys_loaded": strconv.Itoa(len(want)), "rdb_last_load_keys_expired": "0"})

	// Ten seconds later, the keys expired by then are dropped at load.
	clk.add(10 * sec)
	later := newStore(t, 4)
	p3 := openP(t, cfgIn(dir), later, clk)
	live := dump(t, src, clk.now())
	sameEntries(t, dump(t, later, clk.now()), live)
	wantInfo(t, p3, map[string]string{
		"rdb_last_load_keys_loaded":  strconv.Itoa(len(live)),
		"rdb_last_load_keys_expired": strconv.Itoa(len(want) - len(live)),
	})
}

// TestPersistStats: Stats holds the figures INFO persistence prints.
func TestPersistStats(t *testing.T) {
	clk := newClock(t0)
	src := newStore(t, 4)
	p := openP(t, cfgIn(t.TempDir()), src, clk)
	st := p.Stats()
	if !st.LastSaveOK || st.Saves != 0 || st.ChangesSinceLastSave != 0 || st.BGSaveInProgress ||
		st.LastBGSaveDuration != -1 || !st.LastSave.Equal(time.Unix(0, t0)) {
		t.Errorf("Stats() after Open = %+v, want ok, no save, no change, no background save, LastSave at t0", st)
	}

	now := fillStore(t, src, rand.New(rand.NewPCG(3, 4)), 500, 50, t0)
	clk.ns.Store(now)
	if st := p.Stats(); st.ChangesSinceLastSave == 0 {
		t.Errorf("Stats().ChangesSinceLastSave = 0 after 500 writes")
	}
	if err := p.BGSave(); err != nil {
		t.Fatalf("BGSave: %v", err)
	}
	p.Wait()
	st = p.Stats()
	keys := uint64(len(dump(t, src, now)))
	if !st.LastSaveOK || st.LastSaveError != "" || st.Saves != 1 || st.ChangesSinceLastSave != 0 || st.BGSaveInProgress ||
		st.LastBGSaveDuration < 0 || st.LastSaveKeys != keys || st.LastSaveBytes <= 0 || !st.LastSave.Equal(time.Unix(0, now)) {
		t.Errorf("Stats() after BGSave = %+v, want ok, 1 save of %d keys, no change, LastSave at %d", st, keys, now)
	}
	wantInfo(t, p, map[string]string{
		"rdb_saves":           "1",
		"rdb_last_save_time":  strconv.FormatInt(st.LastSave.Unix(), 10),
		"rdb_last_save_keys":  strconv.FormatUint(st.LastSaveKeys, 10),
		"rdb_last_save_bytes": strconv.FormatInt(st.LastSaveBytes, 10),
	})
}

// gateWriter blocks its first Write until gate is closed.
type gateWriter struct {
	w       io.Writer
	entered chan struct{}
	gate    chan struct{}
	once    bool
}

func (g *gateWriter) Write(p []byte) (int, error) {
	if !g.once {
		g.once = true
		close(g.entered)
		<-g.gate
	}
	return g.w.Write(p)
}

func TestBGSaveOneAtATime(t *testing.T) {
	dir := t.TempDir()
	clk := newClock(t0)
	s := newStore(t, 4)
	fillStore(t, s, rand.New(rand.NewPCG(1, 1)), 1000, 100, t0)
	p := openP(t, cfgIn(dir), s, clk)
	entered, gate := make(chan struct{}), make(chan struct{})
	p.wrap = func(w io.Writer) io.Writer { return &gateWriter{w: w, entered: entered, gate: gate} }

	if err := p.BGSave(); err != nil {
		t.Fatalf("first BGSave: %v", err)
	}
	<-entered // the save is now inside its write
	if err := p.BGSave(); !errors.Is(err, ErrSaveInProgress) {
		t.Fatalf("second BGSave = %v, want ErrSaveInProgress", err)
	}
	if err := p.Save(); !errors.Is(err, ErrSaveInProgress) {
		t.Fatalf("Save during BGSave = %v, want ErrSaveInProgress", err)
	}
	if ErrSaveInProgress.Error() != "Background save already in progress" {
		t.Fatalf("ErrSaveInProgress text = %q, want Redis's", ErrSaveInProgress)
	}
	wantInfo(t, p, map[string]string{"rdb_bgsave_in_progress": "1", "rdb_current_bgsave_time_sec": "0"})
	close(gate)
	p.Wait()
	wantInfo(t, p, map[string]string{
		"rdb_bgsave_in_progress": "0", "rdb_current_bgsave_time_sec": "-1", "rdb_saves": "1",
		"rdb_last_bgsave_status": "ok", "rdb_last_bgsave_time_sec": "0",
	})
	p.wrap = nil
	if err := p.BGSave(); err != nil {
		t.Fatalf("BGSave after the first ended: %v", err)
	}
	p.Wait()
	wantInfo(t, p, map[string]string{"rdb_saves": "2"})
}

// TestUnwritableDirThenRecover: a save into a missing directory fails,
// INFO shows it, the store keeps serving, and the next save after the
// directory is back succeeds.
func TestUnwritableDirThenRecover(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	clk := newClock(t0)
	s := newStore(t, 4)
	p := openP(t, cfgIn(dir), s, clk)
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	throttle(t, s, "k", t0)
	if err := p.Save(); err == nil || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Save into a missing dir = %v, want an error naming %s", err, dir)
	}
	if err := p.BGSave(); err != nil {
		t.Fatalf("BGSave = %v: starting must succeed, the failure shows in INFO", err)
	}
	p.Wait()
	got := info(p)
	if got["rdb_last_bgsave_status"] != "err" || !strings.Contains(got["rdb_last_save_error"], "no such file") || got["rdb_saves"] != "0" {
		t.Fatalf("INFO after failed saves: status %q, error %q, saves %q", got["rdb_last_bgsave_status"], got["rdb_last_save_error"], got["rdb_saves"])
	}
	if got["rdb_changes_since_last_save"] != "1" {
		t.Fatalf("rdb_changes_since_last_save = %q after a failed save, want 1", got["rdb_changes_since_last_save"])
	}
	if _, ok := s.Lookup([]byte("k"), t0); !ok {
		t.Fatal("store lost a key after a failed save")
	}

	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := p.Save(); err != nil {
		t.Fatalf("Save after the dir is back: %v", err)
	}
	wantInfo(t, p, map[string]string{"rdb_last_bgsave_status": "ok", "rdb_last_save_error": "", "rdb_saves": "1"})
}

// throttle runs CL.THROTTLE key 0 1 60 at now: a counted change that leaves
// the key exhausted for 60 s.
func throttle(t *testing.T, s *shards.Store, key string, now int64) engine.Result {
	t.Helper()
	var res shards.Result
	op := shards.Op{Code: shards.OpLimit, Keys: [][]byte{[]byte(key)},
		Reqs: []engine.Request{{Kind: engine.KindGCRA, Burst: 0, Rate: 1, Period: 60 * sec, Quantity: 1}}}
	s.Exec(&op, now, &res)
	if res.Err != nil {
		t.Fatalf("throttle %s: %v", key, res.Err)
	}
	return res.Results[0]
}

// change makes one change that the store counts (Changes): a DEL of a key
// put there first (Put itself is the loading path and is not counted).
func change(t *testing.T, s *shards.Store, now int64) {
	t.Helper()
	before := s.Changes()
	put(s, "changed", now+sec)
	var res shards.Result
	s.Exec(&shards.Op{Code: shards.OpDel, Keys: [][]byte{[]byte("changed")}}, now, &res)
	if res.Err != nil || s.Changes() == before {
		t.Fatalf("DEL changed: %v, changes %d before and after", res.Err, before)
	}
}

// put stores a GCRA key expiring at expire directly (not a counted change).
func put(s *shards.Store, key string, expire int64) {
	s.Put([]byte(key), engine.State{Kind: engine.KindGCRA, ExpireAt: expire, A: expire})
}

// TestFailedWriteKeepsOldSnapshot simulates a crash or a full disk midway
// through a save: the old snapshot stays byte for byte, still loads, and no
// temporary file is left behind.
func TestFailedWriteKeepsOldSnapshot(t *testing.T) {
	dir := t.TempDir()
	clk := newClock(t0)
	s := newStore(t, 4)
	p := openP(t, cfgIn(dir), s, clk)
	for i := range 3000 {
		put(s, "old:"+strconv.Itoa(i), t0+100*sec)
	}
	if err := p.Save(); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(p.Path())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3000 {
		put(s, "new:"+strconv.Itoa(i), t0+100*sec)
	}
	for _, failAt := range []int{0, 10, 40_000, len(old) - 1} {
		p.wrap = func(w io.Writer) io.Writer { return &failWriter{n: failAt, err: syscall.ENOSPC} }
		if err := p.Save(); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("Save failing after %d bytes = %v, want ENOSPC", failAt, err)
		}
		now, err := os.ReadFile(p.Path())
		if err != nil || !bytes.Equal(now, old) {
			t.Fatalf("after a save failing at byte %d the snapshot changed (%v)", failAt, err)
		}
		if tmps, _ := filepath.Glob(filepath.Join(dir, "*.tmp-*")); len(tmps) != 0 {
			t.Fatalf("temporary files left: %v", tmps)
		}
	}
	fresh := newStore(t, 4)
	openP(t, cfgIn(dir), fresh, clk)
	if n := fresh.Len(t0); n != 3000 {
		t.Fatalf("loaded %d keys after the failed saves, want the old 3000", n)
	}
}

// TestOpenRemovesLeftoverTemp: a crash during a save leaves a temporary
// file; the next start removes it and loads the real snapshot.
func TestOpenRemovesLeftoverTemp(t *testing.T) {
	dir := t.TempDir()
	clk := newClock(t0)
	s := newStore(t, 4)
	put(s, "k", t0+sec)
	p := openP(t, cfgIn(dir), s, clk)
	if err := p.Save(); err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(dir, "cellserver.snap.tmp-12345")
	if err := os.WriteFile(leftover, []byte("CELLSNAP half a save"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "unrelated.tmp-1")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fresh := newStore(t, 4)
	openP(t, cfgIn(dir), fresh, clk)
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("leftover temporary file still there (%v)", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("a file that is not ours was removed: %v", err)
	}
	if fresh.Len(t0) != 1 {
		t.Fatalf("loaded %d keys, want 1", fresh.Len(t0))
	}
}

func writeCorrupt(t *testing.T, dir string) (string, []byte) {
	t.Helper()
	s := newStore(t, 4)
	for i := range 100 {
		put(s, "k"+strconv.Itoa(i), t0+sec)
	}
	var buf bytes.Buffer
	if _, err := WriteStore(&buf, s, t0, nil); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	b[len(b)/2] ^= 0x10
	path := filepath.Join(dir, "cellserver.snap")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, b
}

func TestCorruptFileRefusedAndUntouched(t *testing.T) {
	dir := t.TempDir()
	path, bad := writeCorrupt(t, dir)
	s := newStore(t, 4)
	_, err := Open(cfgIn(dir), s, newClock(t0).now, quietLogger())
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("Open of a corrupt file = %v, want ErrCorrupt naming %s and the checksum", err, path)
	}
	if got, rerr := os.ReadFile(path); rerr != nil || !bytes.Equal(got, bad) {
		t.Fatalf("the corrupt file was changed (%v)", rerr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only the untouched file", len(entries))
	}
	if s.Len(t0) != 0 {
		t.Fatalf("store holds %d keys after a refused load", s.Len(t0))
	}
}

func TestIgnoreCorruptMovesAside(t *testing.T) {
	dir := t.TempDir()
	path, bad := writeCorrupt(t, dir)
	cfg := cfgIn(dir)
	cfg.IgnoreCorrupt = true
	s := newStore(t, 4)
	clk := newClock(t0)
	p := openP(t, cfg, s, clk)
	if s.Len(t0) != 0 {
		t.Fatalf("store holds %d keys, want an empty start", s.Len(t0))
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("corrupt file still at %s (%v)", path, err)
	}
	aside := path + ".corrupt-" + strconv.Itoa(int(t0/1e9))
	if got, err := os.ReadFile(aside); err != nil || !bytes.Equal(got, bad) {
		t.Fatalf("moved-aside file %s: %v", aside, err)
	}
	// And saving works again.
	put(s, "k", t0+sec)
	if err := p.Save(); err != nil {
		t.Fatal(err)
	}
}

func TestNewerVersionRefusedEvenWithIgnoreCorrupt(t *testing.T) {
	dir := t.TempDir()
	b := encodeSnapshot(t, Header{Created: t0}, sampleEntries())
	b[8] = 9
	path := filepath.Join(dir, "cellserver.snap")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := cfgIn(dir)
	cfg.IgnoreCorrupt = true
	_, err := Open(cfg, newStore(t, 1), newClock(t0).now, quietLogger())
	if !errors.Is(err, ErrVersion) {
		t.Fatalf("Open = %v, want ErrVersion", err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, b) {
		t.Fatal("the file of a newer version was changed")
	}
}

func TestRunSavesPeriodically(t *testing.T) {
	dir := t.TempDir()
	clk := newClock(t0)
	s := newStore(t, 4)
	cfg := cfgIn(dir)
	cfg.SaveSeconds = 60
	p := openP(t, cfg, s, clk)
	p.checkEvery = time.Millisecond

	// Nothing changed: never due, however long it has been.
	clk.add(120 * sec)
	if p.saveDue() {
		t.Fatal("save due with no change")
	}
	// A change, but less than 60 s after the last save.
	p.lastSave = clk.now() - 30*sec
	change(t, s, clk.now())
	if p.saveDue() {
		t.Fatal("save due 30 s after the last one, period 60 s")
	}
	clk.add(30 * sec)
	if !p.saveDue() {
		t.Fatal("save not due 60 s after the last one with a change")
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	poll.Until(t, 10*time.Second, func() error {
		if inf := info(p); inf["rdb_saves"] != "1" {
			return fmt.Errorf("no periodic save: %v", inf)
		}
		return nil
	})
	if p.saveDue() {
		t.Fatal("save still due right after a periodic save")
	}
	// Turned off live: never due.
	if err := p.SetSaveSeconds(0); err != nil {
		t.Fatal(err)
	}
	var res shards.Result
	s.Exec(&shards.Op{Code: shards.OpFlush}, clk.now(), &res)
	clk.add(3600 * sec)
	put(s, "k2", clk.now()+sec)
	if p.saveDue() {
		t.Fatal("save due with saves turned off")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run returned %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
}

// TestRunRetriesFailedSaveAfterDelay: after a failed automatic save, the
// next try waits 5 s (Redis's retry delay), not one check period.
func TestRunRetriesFailedSaveAfterDelay(t *testing.T) {
	dir := t.TempDir()
	clk := newClock(t0)
	s := newStore(t, 4)
	cfg := cfgIn(dir)
	cfg.SaveSeconds = 1
	p := openP(t, cfg, s, clk)
	change(t, s, clk.now())
	clk.add(2 * sec)
	p.wrap = func(io.Writer) io.Writer { return &failWriter{err: syscall.EIO} }
	if err := p.Save(); err == nil {
		t.Fatal("Save through a failing writer succeeded")
	}
	if p.saveDue() {
		t.Fatal("save due at once after a failure")
	}
	clk.add(int64(retryDelay))
	if !p.saveDue() {
		t.Fatal("save not due 5 s after a failure")
	}
}

func TestShutdownWaitsThenSaves(t *testing.T) {
	dir := t.TempDir()
	clk := newClock(t0)
	s := newStore(t, 4)
	p := openP(t, cfgIn(dir), s, clk)
	entered, gate := make(chan struct{}), make(chan struct{})
	p.wrap = func(w io.Writer) io.Writer { return &gateWriter{w: w, entered: entered, gate: gate} }
	if err := p.BGSave(); err != nil {
		t.Fatal(err)
	}
	<-entered
	p.wrap = nil
	put(s, "late", t0+sec)
	done := make(chan error, 1)
	go func() { done <- p.Shutdown(true) }()
	close(gate)
	if err := <-done; err != nil {
		t.Fatalf("Shutdown(true): %v", err)
	}
	fresh := newStore(t, 1)
	openP(t, cfgIn(dir), fresh, clk)
	if _, ok := fresh.Lookup([]byte("late"), t0); !ok {
		t.Fatal("the shutdown save does not hold a key written during the background save")
	}
	wantInfo(t, p, map[string]string{"rdb_saves": "2"})
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg Config
		ok  bool
	}{
		{DefaultConfig(), true},
		{Config{}, true},
		{Config{DBFilename: "a/b.snap"}, false},
		{Config{DBFilename: ".."}, false},
		{Config{SaveSeconds: -1}, false},
		{Config{Dir: "/some/where", DBFilename: "x.snap", SaveSeconds: 0}, true},
	}
	for _, tt := range tests {
		if err := tt.cfg.Validate(); (err == nil) != tt.ok {
			t.Errorf("Validate(%+v) = %v, want ok=%v", tt.cfg, err, tt.ok)
		}
	}
}

func TestOpenUnreadableSnapshotRefused(t *testing.T) {
	dir := t.TempDir()
	// A directory where the file should be: not corrupt, unreadable.
	if err := os.Mkdir(filepath.Join(dir, "cellserver.snap"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := cfgIn(dir)
	cfg.IgnoreCorrupt = true
	if _, err := Open(cfg, newStore(t, 1), newClock(t0).now, quietLogger()); err == nil {
		t.Fatal("Open with a directory in place of the snapshot: no error")
	}
	if fi, err := os.Stat(filepath.Join(dir, "cellserver.snap")); err != nil || !fi.IsDir() {
		t.Fatal("the unreadable snapshot path was moved")
	}
}

func TestOpenMissingDirRefused(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	if _, err := Open(cfgIn(missing), newStore(t, 1), newClock(t0).now, quietLogger()); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Open with a missing dir = %v, want an error naming it", err)
	}
}
