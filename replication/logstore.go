package replication

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftwal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
	"go.etcd.io/bbolt"
)

// Log stores and durability. The raft log and stable store (term, vote) live
// in one of two stores under Config.Dir:
//
//   - "boltdb" (raft.db): raft-boltdb, a copy-on-write B+tree. Every append
//     is a bolt transaction: the new pages, an fdatasync, the meta page, a
//     second fdatasync.
//   - "wal" (wal/): hashicorp's raft-wal, pre-allocated segment files
//     written sequentially: one fdatasync per append.
//
// AppendFsync decides when appends reach the disk, as Redis's appendfsync:
//
//   - "always": before StoreLogs returns, so raft counts a node towards a
//     commit only once the entry is on its disk, and an acknowledged
//     decision is on the disk of a majority.
//   - "everysec": the append is written to the file (the page cache) before
//     StoreLogs returns and synced by a background goroutine once a second.
//     An acknowledged decision is in the page cache of a majority: it
//     survives kill -9 of every node at once, not a power loss of a
//     majority within that second.
//   - "no": written, never synced by cellserver (the kernel writes dirty
//     pages back, within ~30 s by default).
//
// Raft's own rare writes (term and vote, wal's segment list) are synced in
// every mode: a vote forgotten by a power loss could elect two leaders in
// one term.
const (
	LogStoreBolt = "boltdb"
	LogStoreWAL  = "wal"

	FsyncAlways   = "always"
	FsyncEverySec = "everysec"
	FsyncNo       = "no"
)

// syncEvery is how often "everysec" syncs the log.
const syncEvery = time.Second

// logStore is an opened log and stable store with its background syncer.
type logStore struct {
	logs   raft.LogStore
	stable raft.StableStore
	close  func() error
}

// openLogStore opens (or creates) the configured store under cfg.Dir. The
// syncer it starts for "everysec" stops when close is called.
func openLogStore(cfg *Config, logger hclog.Logger, slogger *slog.Logger) (*logStore, error) {
	switch cfg.LogStore {
	case LogStoreBolt, "":
		return openBolt(cfg, slogger)
	case LogStoreWAL:
		return openWAL(cfg, logger, slogger)
	}
	return nil, fmt.Errorf("replication: unknown log store %q", cfg.LogStore)
}

func openBolt(cfg *Config, slogger *slog.Logger) (*logStore, error) {
	path := filepath.Join(cfg.Dir, "raft.db")
	if _, err := os.Stat(filepath.Join(cfg.Dir, "wal")); err == nil {
		return nil, fmt.Errorf("replication: %s holds a wal log store; start with the wal log store or wipe it", cfg.Dir)
	}
	lazy := cfg.AppendFsync != FsyncAlways
	// NoFreelistSync: bolt otherwise rewrites its whole free-page list on
	// every commit, which grows with the log and slows each append.
	b, err := raftboltdb.New(raftboltdb.Options{
		Path:        path,
		BoltOptions: &bbolt.Options{Timeout: time.Second, NoFreelistSync: true, NoSync: lazy},
		NoSync:      lazy,
	})
	if err != nil {
		return nil, fmt.Errorf("replication: open raft store: %w", err)
	}
	if !lazy {
		return &logStore{logs: b, stable: b, close: b.Close}, nil
	}
	// Term and vote must be durable before raft acts on them, whatever the
	// log's schedule: a vote forgotten by a power loss could elect two
	// leaders in one term. They are written only around elections.
	s := &logStore{logs: b, stable: syncedStable{StableStore: b, sync: b.Sync}, close: b.Close}
	if cfg.AppendFsync == FsyncEverySec {
		stop := startSyncer(b.Sync, slogger)
		s.close = func() error { return errors.Join(stop(), b.Close()) }
	}
	return s, nil
}

// syncedStable syncs after every write to raft's stable store (term, vote)
// when the store below does not.
type syncedStable struct {
	raft.StableStore
	sync func() error
}

// Set implements raft.StableStore.
func (s syncedStable) Set(key, val []byte) error {
	if err := s.StableStore.Set(key, val); err != nil {
		return err
	}
	return s.sync()
}

// SetUint64 implements raft.StableStore.
func (s syncedStable) SetUint64(key []byte, val uint64) error {
	if err := s.StableStore.SetUint64(key, val); err != nil {
		return err
	}
	return s.sync()
}

func openWAL(cfg *Config, logger hclog.Logger, slogger *slog.Logger) (*logStore, error) {
	if _, err := os.Stat(filepath.Join(cfg.Dir, "raft.db")); err == nil {
		return nil, fmt.Errorf("replication: %s holds a boltdb log store; start with the boltdb log store or wipe it", cfg.Dir)
	}
	dir := filepath.Join(cfg.Dir, "wal")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("replication: create %s: %w", dir, err)
	}
	var vfs types.VFS = walfs.New()
	var lazy *lazyVFS
	if cfg.AppendFsync != FsyncAlways {
		lazy = &lazyVFS{VFS: vfs, dirty: map[*lazyFile]struct{}{}}
		vfs = lazy
	}
	// raft-wal's Close leaves its meta store (wal-meta.db, a bolt file
	// holding a flock) open: own it, and close it after the WAL.
	meta := &metadb.BoltMetaDB{}
	w, err := raftwal.Open(dir, raftwal.WithMetaStore(meta), raftwal.WithSegmentFiler(segment.NewFiler(dir, vfs)), raftwal.WithLogger(logger.Named("wal")))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("replication: open raft wal: %w", err), meta.Close())
	}
	s := &logStore{logs: w, stable: w, close: func() error { return errors.Join(w.Close(), meta.Close()) }}
	if cfg.AppendFsync == FsyncEverySec {
		stop := startSyncer(lazy.syncDirty, slogger)
		s.close = func() error {
			serr := stop()
			return errors.Join(w.Close(), meta.Close(), serr)
		}
	}
	return s, nil
}

// startSyncer calls sync every syncEvery until the returned stop is called;
// stop syncs once more and returns the first error that final sync met.
func startSyncer(sync func() error, log *slog.Logger) (stop func() error) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(syncEvery)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				if err := sync(); err != nil {
					log.Warn("replication: background sync of the raft log failed", "err", err)
				}
			}
		}
	}()
	return func() error {
		close(quit)
		<-done
		return sync()
	}
}

// lazyVFS is raft-wal's file system with segment syncs deferred to a
// background syncer ("everysec") or to the kernel ("no"). Writes still
// reach the file (the page cache) before an append returns.
type lazyVFS struct {
	types.VFS
	mu    sync.Mutex
	dirty map[*lazyFile]struct{} // files with writes since their last sync; guarded by mu
}

// Create implements types.VFS.
func (v *lazyVFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := v.VFS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return &lazyFile{WritableFile: f, v: v}, nil
}

// OpenWriter implements types.VFS.
func (v *lazyVFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := v.VFS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	return &lazyFile{WritableFile: f, v: v}, nil
}

// syncDirty syncs every file written since its last sync.
func (v *lazyVFS) syncDirty() error {
	v.mu.Lock()
	files := make([]*lazyFile, 0, len(v.dirty))
	for f := range v.dirty {
		files = append(files, f)
	}
	v.mu.Unlock()
	var errs []error
	for _, f := range files {
		if err := f.syncNow(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// syncNow syncs the file unless it was closed since (Close waits for a sync
// in flight, so the writes it covers are on the disk either way).
func (f *lazyFile) syncNow() error {
	f.syncMu.Lock()
	defer f.syncMu.Unlock()
	f.v.mu.Lock()
	_, dirty := f.v.dirty[f]
	delete(f.v.dirty, f)
	f.v.mu.Unlock()
	if !dirty || f.closed {
		return nil
	}
	return f.WritableFile.Sync()
}

// lazyFile records a Sync instead of doing it; Close syncs first, so a
// sealed segment is always durable.
type lazyFile struct {
	types.WritableFile
	v      *lazyVFS
	syncMu sync.Mutex // held by a real sync and by Close
	closed bool       // guarded by syncMu
}

// Sync marks the file for the next background sync.
func (f *lazyFile) Sync() error {
	f.v.mu.Lock()
	f.v.dirty[f] = struct{}{}
	f.v.mu.Unlock()
	return nil
}

// Close syncs the file if it has unsynced writes, then closes it.
func (f *lazyFile) Close() error {
	f.syncMu.Lock()
	defer f.syncMu.Unlock()
	f.closed = true
	f.v.mu.Lock()
	_, dirty := f.v.dirty[f]
	delete(f.v.dirty, f)
	f.v.mu.Unlock()
	var serr error
	if dirty {
		serr = f.WritableFile.Sync()
	}
	return errors.Join(serr, f.WritableFile.Close())
}
