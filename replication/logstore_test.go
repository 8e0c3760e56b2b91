package replication

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftwal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"

	"github.com/cellserver/cellserver/internal/testlog"
)

var (
	logStores = []string{LogStoreBolt, LogStoreWAL}
	fsyncs    = []string{FsyncAlways, FsyncEverySec, FsyncNo}
)

// openTestLogStore opens the store/mode pair under dir as a node would. An
// open that blocks (a lock on the directory's files still held) fails the
// test after 10 s instead of hanging the package.
func openTestLogStore(t *testing.T, dir, store, fsync string) (*logStore, error) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Dir, cfg.LogStore, cfg.AppendFsync = dir, store, fsync
	type opened struct {
		s   *logStore
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		s, err := openLogStore(&cfg, hclog.NewNullLogger(), slog.New(slog.DiscardHandler))
		ch <- opened{s, err}
	}()
	select {
	case o := <-ch:
		return o.s, o.err
	case <-time.After(10 * time.Second):
		t.Fatalf("openLogStore(%s, %s) blocked for 10 s: a lock on %s is still held (was the previous store closed completely?)", store, fsync, dir)
		return nil, nil
	}
}

func mustOpenLogStore(t *testing.T, dir, store, fsync string) *logStore {
	t.Helper()
	s, err := openTestLogStore(t, dir, store, fsync)
	if err != nil {
		t.Fatalf("openLogStore(%s, %s): %v", store, fsync, err)
	}
	return s
}

// testLogEntry is the entry the tests store at index i: its data varies in
// length so that a misplaced frame shows.
func testLogEntry(i uint64) *raft.Log {
	return &raft.Log{
		Index: i,
		Term:  1 + i/100,
		Type:  raft.LogCommand,
		Data:  bytes.Repeat([]byte{byte(i)}, 1+int(i%37)*16),
	}
}

// storeTestLogs appends entries first..last in batches of 1 to 7 entries,
// as raft's pipeline does.
func storeTestLogs(t *testing.T, s raft.LogStore, first, last uint64) {
	t.Helper()
	for i := first; i <= last; {
		n := 1 + i%7
		var batch []*raft.Log
		for ; n > 0 && i <= last; n, i = n-1, i+1 {
			batch = append(batch, testLogEntry(i))
		}
		if err := s.StoreLogs(batch); err != nil {
			t.Fatalf("StoreLogs(%d..%d): %v", batch[0].Index, batch[len(batch)-1].Index, err)
		}
	}
}

// checkTestLogs reads first..last back and compares them with what
// storeTestLogs wrote.
func checkTestLogs(t *testing.T, s raft.LogStore, first, last uint64) {
	t.Helper()
	if got, err := s.FirstIndex(); err != nil || got != first {
		t.Fatalf("FirstIndex() = %d, %v; want %d", got, err, first)
	}
	if got, err := s.LastIndex(); err != nil || got != last {
		t.Fatalf("LastIndex() = %d, %v; want %d", got, err, last)
	}
	for i := first; i <= last; i++ {
		var got raft.Log
		if err := s.GetLog(i, &got); err != nil {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
		want := testLogEntry(i)
		if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type || !bytes.Equal(got.Data, want.Data) {
			t.Fatalf("GetLog(%d) = index %d term %d type %v %d bytes, want index %d term %d type %v %d bytes",
				i, got.Index, got.Term, got.Type, len(got.Data), want.Index, want.Term, want.Type, len(want.Data))
		}
	}
}

// The stable store keys raft uses for its term and vote.
var (
	keyCurrentTerm  = []byte("CurrentTerm")
	keyLastVoteTerm = []byte("LastVoteTerm")
	keyLastVoteCand = []byte("LastVoteCand")
)

// The log and the term and vote survive Close and a reopen, for every store
// and durability mode, and appends after the reopen continue the recovered
// log (raft-wal recovers its tail segment and writes on).
func TestLogStoreSurvivesReopen(t *testing.T) {
	for _, store := range logStores {
		for _, fsync := range fsyncs {
			t.Run(store+"/"+fsync, func(t *testing.T) {
				dir := t.TempDir()
				s := mustOpenLogStore(t, dir, store, fsync)
				storeTestLogs(t, s.logs, 1, 300)
				if err := s.stable.SetUint64(keyCurrentTerm, 7); err != nil {
					t.Fatal(err)
				}
				if err := s.stable.SetUint64(keyLastVoteTerm, 7); err != nil {
					t.Fatal(err)
				}
				if err := s.stable.Set(keyLastVoteCand, []byte("n2")); err != nil {
					t.Fatal(err)
				}
				if err := s.close(); err != nil {
					t.Fatalf("close: %v", err)
				}

				s = mustOpenLogStore(t, dir, store, fsync)
				checkTestLogs(t, s.logs, 1, 300)
				if got, err := s.stable.GetUint64(keyCurrentTerm); err != nil || got != 7 {
					t.Fatalf("GetUint64(CurrentTerm) after reopen = %d, %v; want 7", got, err)
				}
				if got, err := s.stable.GetUint64(keyLastVoteTerm); err != nil || got != 7 {
					t.Fatalf("GetUint64(LastVoteTerm) after reopen = %d, %v; want 7", got, err)
				}
				if got, err := s.stable.Get(keyLastVoteCand); err != nil || string(got) != "n2" {
					t.Fatalf("Get(LastVoteCand) after reopen = %q, %v; want n2", got, err)
				}
				storeTestLogs(t, s.logs, 301, 350)
				if err := s.stable.SetUint64(keyCurrentTerm, 8); err != nil {
					t.Fatal(err)
				}
				if err := s.close(); err != nil {
					t.Fatalf("second close: %v", err)
				}

				s = mustOpenLogStore(t, dir, store, fsync)
				defer s.close()
				checkTestLogs(t, s.logs, 1, 350)
				if got, err := s.stable.GetUint64(keyCurrentTerm); err != nil || got != 8 {
					t.Fatalf("GetUint64(CurrentTerm) after second reopen = %d, %v; want 8", got, err)
				}
			})
		}
	}
}

// A directory holding one kind of store is refused by the other, with an
// error naming the store it holds, and the refusal leaves the directory as
// it was: the right store still opens and still has its log.
func TestLogStoreRefusesOtherKind(t *testing.T) {
	for _, tc := range []struct {
		have, open string
		wantErr    string
		notCreated string // what the refused open must not leave behind
	}{
		{have: LogStoreBolt, open: LogStoreWAL, wantErr: "holds a boltdb log store", notCreated: "wal"},
		{have: LogStoreWAL, open: LogStoreBolt, wantErr: "holds a wal log store", notCreated: "raft.db"},
	} {
		t.Run(tc.have+"_opened_as_"+tc.open, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpenLogStore(t, dir, tc.have, FsyncAlways)
			storeTestLogs(t, s.logs, 1, 10)
			if err := s.close(); err != nil {
				t.Fatal(err)
			}
			for _, fsync := range fsyncs {
				got, err := openTestLogStore(t, dir, tc.open, fsync)
				if err == nil {
					got.close()
					t.Fatalf("openLogStore(%s, %s) on a %s directory = nil error, want %q", tc.open, fsync, tc.have, tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), dir) {
					t.Fatalf("openLogStore(%s, %s) on a %s directory: %v; want an error naming %s and %q", tc.open, fsync, tc.have, err, dir, tc.wantErr)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, tc.notCreated)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("refused open left %s behind (stat: %v)", tc.notCreated, err)
			}
			s = mustOpenLogStore(t, dir, tc.have, FsyncAlways)
			defer s.close()
			checkTestLogs(t, s.logs, 1, 10)
		})
	}
}

// Each mode is wired as documented: "always" hands the store's own syncs
// to the disk (bolt syncs its commits, raft-wal its segment files through
// the plain file system); "everysec" and "no" defer them (bolt NoSync,
// raft-wal's segment files behind lazyVFS).
func TestLogStoreModeWiring(t *testing.T) {
	for _, store := range logStores {
		for _, fsync := range fsyncs {
			t.Run(store+"/"+fsync, func(t *testing.T) {
				s := mustOpenLogStore(t, t.TempDir(), store, fsync)
				defer s.close()
				want := fsync != FsyncAlways
				if got := defersSyncs(t, s); got != want {
					t.Fatalf("%s with appendfsync %s defers syncs = %v, want %v", store, fsync, got, want)
				}
			})
		}
	}
}

// defersSyncs reports whether the opened store skips its own syncs. The
// stores keep that setting unexported, so it is read by reflection (reads
// only); a library upgrade that moves the fields fails the test here,
// loudly, rather than passing without checking anything.
func defersSyncs(t *testing.T, s *logStore) bool {
	t.Helper()
	field := func(v reflect.Value, name string) reflect.Value {
		t.Helper()
		f := v.FieldByName(name)
		if !f.IsValid() {
			t.Fatalf("%s has no field %s: update defersSyncs for this library version", v.Type(), name)
		}
		return f
	}
	switch l := s.logs.(type) {
	case *raftboltdb.BoltStore:
		conn := field(reflect.ValueOf(l).Elem(), "conn") // *bbolt.DB
		return field(conn.Elem(), "NoSync").Bool()
	case *raftwal.WAL:
		filer := field(reflect.ValueOf(l).Elem(), "sf").Elem() // *segment.Filer
		vfs := field(filer.Elem(), "vfs").Elem()
		switch vfs.Type() {
		case reflect.TypeFor[*lazyVFS]():
			return true
		case reflect.TypeFor[*walfs.FS]():
			return false
		}
		t.Fatalf("raft-wal segment files go through %s, want *walfs.FS or *lazyVFS", vfs.Type())
	default:
		t.Fatalf("log store is a %T", s.logs)
	}
	return false
}

// diskVFS is raft-wal's file system recording, per file, the writes, syncs
// and closes that reach it, in one global order.
type diskVFS struct {
	types.VFS
	mu    sync.Mutex
	seq   int
	files map[string]*diskEvents
}

// diskEvents is one file's history: the sequence number of its last write,
// last sync and close (0 for never), and its sync count.
type diskEvents struct {
	lastWrite, lastSync, closed int
	syncs                       int
}

func newDiskVFS() *diskVFS { return &diskVFS{VFS: walfs.New(), files: map[string]*diskEvents{}} }

func (v *diskVFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := v.VFS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return v.wrap(name, f), nil
}

func (v *diskVFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := v.VFS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	return v.wrap(name, f), nil
}

func (v *diskVFS) wrap(name string, f types.WritableFile) *diskFile {
	v.mu.Lock()
	defer v.mu.Unlock()
	ev := &diskEvents{}
	v.files[name] = ev
	return &diskFile{WritableFile: f, v: v, ev: ev}
}

// record runs f on a file's events with the next sequence number.
func (v *diskVFS) record(ev *diskEvents, f func(ev *diskEvents, seq int)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.seq++
	f(ev, v.seq)
}

// snapshot returns a copy of every file's events.
func (v *diskVFS) snapshot() map[string]diskEvents {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make(map[string]diskEvents, len(v.files))
	for name, ev := range v.files {
		out[name] = *ev
	}
	return out
}

func (v *diskVFS) totalSyncs() int {
	n := 0
	for _, ev := range v.snapshot() {
		n += ev.syncs
	}
	return n
}

// unsynced returns the files with writes after their last sync.
func (v *diskVFS) unsynced() []string {
	var out []string
	for name, ev := range v.snapshot() {
		if ev.lastWrite > ev.lastSync {
			out = append(out, name)
		}
	}
	return out
}

type diskFile struct {
	types.WritableFile
	v  *diskVFS
	ev *diskEvents
}

func (f *diskFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.WritableFile.WriteAt(p, off)
	f.v.record(f.ev, func(ev *diskEvents, seq int) { ev.lastWrite = seq })
	return n, err
}

func (f *diskFile) Sync() error {
	err := f.WritableFile.Sync()
	f.v.record(f.ev, func(ev *diskEvents, seq int) { ev.lastSync = seq; ev.syncs++ })
	return err
}

func (f *diskFile) Close() error {
	err := f.WritableFile.Close()
	f.v.record(f.ev, func(ev *diskEvents, seq int) { ev.closed = seq })
	return err
}

func (v *lazyVFS) dirtyCount() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.dirty)
}

// openTestWAL opens raft-wal in dir over vfs with small segments, so that a
// few hundred entries fill several (sealing a segment is a sync of its own).
func openTestWAL(t *testing.T, dir string, vfs types.VFS) *raftwal.WAL {
	t.Helper()
	meta := &metadb.BoltMetaDB{} // WAL.Close leaves the meta store open
	t.Cleanup(func() { meta.Close() })
	w, err := raftwal.Open(dir, raftwal.WithMetaStore(meta), raftwal.WithSegmentFiler(segment.NewFiler(dir, vfs)),
		raftwal.WithSegmentSize(16<<10), raftwal.WithLogger(hclog.NewNullLogger()))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// raft-wal syncs every append itself; "always" passes those syncs to the
// disk, so an append is on it (no file has writes after its last sync) when
// StoreLogs returns.
func TestWALAlwaysSyncsEachAppend(t *testing.T) {
	disk := newDiskVFS()
	w := openTestWAL(t, t.TempDir(), disk)
	defer w.Close()
	for i := uint64(1); i <= 200; i++ {
		before := disk.totalSyncs()
		storeTestLogs(t, w, i, i)
		if got := disk.totalSyncs(); got <= before {
			t.Fatalf("StoreLogs(%d): %d syncs reached the disk, want at least 1", i, got-before)
		}
		if u := disk.unsynced(); len(u) > 0 {
			t.Fatalf("after StoreLogs(%d): %v have unsynced writes", i, u)
		}
	}
	if n := len(disk.snapshot()); n < 3 {
		t.Fatalf("%d segment files written, want several (test setup)", n)
	}
}

// Under "everysec" and "no", lazyVFS keeps raft-wal's syncs from the disk
// and marks the files instead; syncDirty syncs exactly the marked files and
// clears them, and closing a marked file (a sealed or the tail segment at
// shutdown) syncs it first.
func TestLazyVFSDefersAndSyncsDirty(t *testing.T) {
	disk := newDiskVFS()
	lazy := &lazyVFS{VFS: disk, dirty: map[*lazyFile]struct{}{}}
	w := openTestWAL(t, t.TempDir(), lazy)
	closed := false
	defer func() {
		if !closed {
			w.Close()
		}
	}()

	storeTestLogs(t, w, 1, 200)
	if got := disk.totalSyncs(); got != 0 {
		t.Fatalf("%d syncs reached the disk before syncDirty, want 0", got)
	}
	written := len(disk.unsynced())
	if written < 3 {
		t.Fatalf("%d segment files with writes, want several (test setup)", written)
	}
	// Every written file is marked; rotation may have created one more,
	// still empty, tail that nothing has synced or marked yet.
	if got := lazy.dirtyCount(); got != written {
		t.Fatalf("%d files marked dirty, want the %d written", got, written)
	}

	if err := lazy.syncDirty(); err != nil {
		t.Fatalf("syncDirty: %v", err)
	}
	if got := lazy.dirtyCount(); got != 0 {
		t.Fatalf("%d files still marked after syncDirty, want 0", got)
	}
	if u := disk.unsynced(); len(u) > 0 {
		t.Fatalf("after syncDirty %v have unsynced writes", u)
	}
	if err := lazy.syncDirty(); err != nil {
		t.Fatalf("second syncDirty: %v", err)
	}
	synced := disk.snapshot()
	for name, ev := range synced {
		if ev.lastWrite > 0 && ev.syncs != 1 {
			t.Errorf("%s synced %d times by two syncDirty calls, want 1 (nothing new was written)", name, ev.syncs)
		}
	}

	// A new append marks only the tail; Close syncs it, then closes it.
	storeTestLogs(t, w, 201, 202)
	if u := disk.unsynced(); len(u) != 1 || lazy.dirtyCount() != 1 {
		t.Fatalf("after one more append: unsynced %v, %d marked; want the tail alone", u, lazy.dirtyCount())
	}
	tail := disk.unsynced()[0]
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	after := disk.snapshot()
	for name, ev := range after {
		if ev.closed == 0 {
			t.Errorf("%s not closed by WAL.Close", name)
			continue
		}
		if ev.lastWrite > ev.lastSync || ev.lastSync > ev.closed {
			t.Errorf("%s: last write #%d, last sync #%d, close #%d; want its writes synced before it closed", name, ev.lastWrite, ev.lastSync, ev.closed)
		}
		if name != tail && ev.syncs != synced[name].syncs {
			t.Errorf("%s (clean) synced %d times on close, want 0", name, ev.syncs-synced[name].syncs)
		}
	}
	if got := lazy.dirtyCount(); got != 0 {
		t.Fatalf("%d closed files still marked dirty", got)
	}
}

// The "everysec" syncer syncs on its ticker, logs a failed sync and goes
// on, and its stop syncs once more and returns that sync's error. (The one
// wait here is for the first tick: syncEvery is a second.)
func TestStartSyncer(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	errDisk := errors.New("disk on fire")
	failing := func() error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		return errDisk
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return calls
	}
	var logs testlog.Buffer
	stop := startSyncer(failing, slog.New(slog.NewTextHandler(&logs, nil)))
	deadline := time.Now().Add(5 * syncEvery)
	for count() == 0 || !strings.Contains(logs.String(), "background sync of the raft log failed") {
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("no logged background sync within %v (%d calls; log %q)", 5*syncEvery, count(), logs.String())
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
	before := count()
	if err := stop(); !errors.Is(err, errDisk) {
		t.Fatalf("stop() = %v, want the final sync's error %v", err, errDisk)
	}
	if got := count(); got != before+1 {
		t.Fatalf("stop made %d syncs, want exactly 1 (the final one)", got-before)
	}
}

// A stopped syncer with a healthy disk reports no error.
func TestStartSyncerStopSyncs(t *testing.T) {
	n := 0
	stop := startSyncer(func() error { n++; return nil }, slog.New(slog.DiscardHandler))
	if err := stop(); err != nil {
		t.Fatalf("stop() = %v, want nil", err)
	}
	if n < 1 {
		t.Fatalf("stop synced %d times, want at least 1", n)
	}
}

// A raft-wal segment can be closed (deleted after compaction, or after a
// follower installs a snapshot) while syncDirty is syncing the files it
// took: the close must not make the background sync fail, and the file's
// writes must not be dropped unsynced.
func TestLazyVFSCloseDuringSyncDirty(t *testing.T) {
	gate := &gateVFS{entered: make(chan *gateFile, 1), release: make(chan struct{})}
	lazy := &lazyVFS{VFS: gate, dirty: map[*lazyFile]struct{}{}}
	var files []*lazyFile
	for i := range 2 {
		f, err := lazy.Create("", fmt.Sprintf("seg%d", i), 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("x"), 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil { // marks it
			t.Fatal(err)
		}
		files = append(files, f.(*lazyFile))
	}
	done := make(chan error, 1)
	go func() { done <- lazy.syncDirty() }()
	first := <-gate.entered // syncDirty took both files and is syncing one
	var other *lazyFile
	for _, f := range files {
		if f.WritableFile != first {
			other = f
		}
	}
	if err := other.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	close(gate.release)
	if err := <-done; err != nil {
		t.Errorf("syncDirty with a file closed meanwhile = %v, want nil", err)
	}
	if g := other.WritableFile.(*gateFile); g.syncs == 0 {
		t.Errorf("a marked file was closed without its writes ever being synced")
	}
}

// gateVFS makes in-memory files whose first Sync waits for release.
type gateVFS struct {
	types.VFS
	entered chan *gateFile
	release chan struct{}
	once    sync.Once
}

func (v *gateVFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	return &gateFile{v: v}, nil
}

type gateFile struct {
	v      *gateVFS
	mu     sync.Mutex
	syncs  int
	closed bool
}

func (f *gateFile) WriteAt(p []byte, off int64) (int, error) { return len(p), nil }
func (f *gateFile) ReadAt(p []byte, off int64) (int, error)  { return 0, errors.New("not readable") }

func (f *gateFile) Sync() error {
	first := false
	f.v.once.Do(func() { first = true })
	if first {
		f.v.entered <- f
		<-f.v.release
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return os.ErrClosed // as *os.File answers
	}
	f.syncs++
	return nil
}

func (f *gateFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}
