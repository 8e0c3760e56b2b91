package snapshot

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/shards"
)

// ErrSaveInProgress is returned by BGSave, and by Save, while a background
// save is running. Its text is Redis's reply for the same case (the wire
// layer prefixes "ERR ").
var ErrSaveInProgress = errors.New("Background save already in progress") //nolint:staticcheck // Redis's wording, capital included

// Config configures standalone persistence. Names follow redis.conf.
type Config struct {
	// Dir is the directory of the snapshot file and its temporary files
	// (redis.conf "dir"). Default ".".
	Dir string
	// DBFilename is the snapshot's file name inside Dir, without any path
	// separator (redis.conf "dbfilename"). Default "cellserver.snap".
	DBFilename string
	// SaveSeconds is the period, in seconds, of automatic background saves,
	// made only when something changed since the last save (redis.conf
	// "save <seconds> 1"). 0 turns them off. Default 60.
	SaveSeconds int
	// IgnoreCorrupt makes Open move a corrupt or truncated snapshot aside
	// (renamed to <file>.corrupt-<unix seconds>) and start empty, instead
	// of refusing to start. A snapshot of a newer format version, or one
	// that cannot be read at all, is refused either way.
	IgnoreCorrupt bool
}

// DefaultConfig returns the defaults: Dir ".", DBFilename
// "cellserver.snap", SaveSeconds 60.
func DefaultConfig() Config {
	return Config{Dir: ".", DBFilename: "cellserver.snap", SaveSeconds: 60}
}

// Validate reports whether c is usable by Open. Empty Dir and DBFilename
// mean their defaults.
func (c Config) Validate() error {
	if c.DBFilename != "" && (c.DBFilename != filepath.Base(c.DBFilename) || c.DBFilename == "." || c.DBFilename == "..") {
		return fmt.Errorf("snapshot: dbfilename %q must be a plain file name (the directory is set by dir)", c.DBFilename)
	}
	if c.SaveSeconds < 0 {
		return fmt.Errorf("snapshot: save period %d s is negative", c.SaveSeconds)
	}
	return nil
}

// retryDelay is how long automatic saves wait after a failed one before
// trying again (Redis's CONFIG_BGSAVE_RETRY_DELAY), rather than hammering a
// full disk every second.
const retryDelay = 5 * time.Second

// Persister is standalone persistence: it loads the snapshot at start-up
// (Open) and writes it on demand (Save, BGSave), periodically (Run) and at
// shutdown (Shutdown). Every write goes to a temporary file in the same
// directory, which is fsynced, renamed over the snapshot and followed by an
// fsync of the directory, so that a crash at any instant leaves either the
// old or the new snapshot, never a broken one.
//
// All methods are safe for concurrent use. It satisfies the resp and
// metrics packages' Persistence interfaces.
type Persister struct {
	cfg   Config
	path  string
	store *shards.Store
	clock func() int64
	log   *slog.Logger

	saveSeconds atomic.Int64
	checkEvery  time.Duration             // how often Run checks whether a save is due
	wrap        func(io.Writer) io.Writer // tests: wraps the file writer (fault injection)

	writeMu sync.Mutex     // one write of the file at a time
	wg      sync.WaitGroup // background saves

	mu             sync.Mutex // guards the fields below
	bgRunning      bool
	bgStart        time.Time
	lastSave       int64  // Unix ns of the last successful save (start-up at first)
	lastTry        int64  // Unix ns of the last save attempt
	changesAtSave  uint64 // store.Changes() when the last successful save began
	lastOK         bool
	lastErr        string
	lastBGDuration time.Duration // -1 before the first background save
	lastDuration   time.Duration
	lastSaveKeys   uint64
	lastSaveBytes  int64
	saves          int64
	loadKeys       int
	loadExpired    int
	loadDuration   time.Duration
}

// Open prepares persistence for store (which should be empty and not yet
// serving) and loads the snapshot file Dir/DBFilename if there is one,
// dropping keys already expired at clock() (Unix ns). It logs the load time
// and key count.
//
// Dir must exist. A corrupt or truncated snapshot is refused with an error
// naming the file and what is wrong (an error matching ErrCorrupt), and the
// file is left untouched; with cfg.IgnoreCorrupt it is renamed aside instead and Open
// starts empty. Leftover temporary files of an interrupted save are removed.
// logger may be nil (slog.Default()).
func Open(cfg Config, store *shards.Store, clock func() int64, logger *slog.Logger) (*Persister, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Dir == "" {
		cfg.Dir = "."
	}
	if cfg.DBFilename == "" {
		cfg.DBFilename = DefaultConfig().DBFilename
	}
	if logger == nil {
		logger = slog.Default()
	}
	p := &Persister{
		cfg:            cfg,
		path:           filepath.Join(cfg.Dir, cfg.DBFilename),
		store:          store,
		clock:          clock,
		log:            logger,
		checkEvery:     time.Second,
		lastOK:         true,
		lastBGDuration: -1,
	}
	p.saveSeconds.Store(int64(cfg.SaveSeconds))
	// As Redis refuses a dir it cannot enter, refuse one that is missing:
	// every save would fail.
	if fi, err := os.Stat(cfg.Dir); err != nil {
		return nil, fmt.Errorf("snapshot: dir: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("snapshot: dir %s is not a directory", cfg.Dir)
	}
	p.removeTemps()
	if err := p.load(); err != nil {
		return nil, err
	}
	now := clock()
	p.lastSave, p.lastTry = now, now // as Redis: at start-up the data counts as saved
	p.changesAtSave = store.Changes()
	return p, nil
}

// tempPattern is the os.CreateTemp pattern of a save's temporary file.
func (p *Persister) tempPattern() string { return p.cfg.DBFilename + ".tmp-*" }

// removeTemps deletes temporary files left by a save that a crash
// interrupted. They are never the snapshot: only a completed, fsynced
// temporary file is ever renamed to it.
func (p *Persister) removeTemps() {
	matches, _ := filepath.Glob(filepath.Join(p.cfg.Dir, p.tempPattern()))
	for _, m := range matches {
		if err := os.Remove(m); err == nil {
			p.log.Info("removed the temporary file of an interrupted save", "file", m)
		}
	}
}

func (p *Persister) load() error {
	start := time.Now()
	f, err := os.Open(p.path)
	if errors.Is(err, os.ErrNotExist) {
		p.log.Info("no snapshot file, starting empty", "file", p.path)
		return nil
	}
	if err != nil {
		return fmt.Errorf("snapshot: open %s: %w", p.path, err)
	}
	stats, err := Load(bufio.NewReaderSize(f, 1<<20), p.store, p.clock())
	f.Close()
	if err != nil {
		if !errors.Is(err, ErrCorrupt) || !p.cfg.IgnoreCorrupt {
			return fmt.Errorf("snapshot: load %s: %w", p.path, err)
		}
		aside := fmt.Sprintf("%s.corrupt-%d", p.path, time.Unix(0, p.clock()).Unix())
		if rerr := os.Rename(p.path, aside); rerr != nil {
			return fmt.Errorf("snapshot: load %s: %w; moving it aside failed: %v", p.path, err, rerr)
		}
		p.log.Warn("snapshot file is corrupt: moved it aside and starting empty",
			"file", p.path, "moved_to", aside, "error", err.Error())
		return nil
	}
	p.loadKeys, p.loadExpired = stats.Keys, stats.Expired
	p.loadDuration = time.Since(start)
	p.log.Info("snapshot loaded", "file", p.path, "keys", stats.Keys, "expired_dropped", stats.Expired,
		"bytes", stats.Bytes, "load_time", p.loadDuration.Round(time.Microsecond).String(),
		"created", time.Unix(0, stats.Header.Created).UTC().Format(time.RFC3339Nano))
	return nil
}

// Path returns the snapshot file's path (Dir joined with DBFilename).
func (p *Persister) Path() string { return p.path }

// Dir returns the snapshot directory as configured (CONFIG GET dir).
func (p *Persister) Dir() string { return p.cfg.Dir }

// DBFilename returns the snapshot file name (CONFIG GET dbfilename).
func (p *Persister) DBFilename() string { return p.cfg.DBFilename }

// SaveSeconds returns the automatic save period in seconds (0: off).
func (p *Persister) SaveSeconds() int { return int(p.saveSeconds.Load()) }

// SetSaveSeconds changes the automatic save period (CONFIG SET save); 0
// turns automatic saves off. Run picks the change up at its next check.
func (p *Persister) SetSaveSeconds(n int) error {
	if n < 0 {
		return fmt.Errorf("snapshot: save period %d s is negative", n)
	}
	p.saveSeconds.Store(int64(n))
	return nil
}

// Save writes the snapshot now and returns when it is durable (SAVE).
// Unlike Redis's SAVE it does not stop traffic: shards are copied one at a
// time. While a background save runs it returns ErrSaveInProgress; two
// concurrent Save calls write one after the other.
func (p *Persister) Save() error {
	p.mu.Lock()
	running := p.bgRunning
	p.mu.Unlock()
	if running {
		return ErrSaveInProgress
	}
	return p.save(false)
}

// BGSave starts a save in the background and returns at once (BGSAVE), or
// returns ErrSaveInProgress if one is running. Its outcome shows in
// Stats, InfoFields and LastSave; Wait waits for it.
func (p *Persister) BGSave() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bgRunning {
		return ErrSaveInProgress
	}
	p.bgRunning = true
	p.bgStart = time.Now()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_ = p.save(true) // the outcome is recorded and logged by save
	}()
	return nil
}

// Wait blocks until no background save is running.
func (p *Persister) Wait() { p.wg.Wait() }

// Shutdown waits for a running background save to end and then, with save,
// writes the snapshot (the save on SIGTERM, SHUTDOWN SAVE). Stop Run first,
// so that it starts no new save. It returns the save's error, in which case
// the caller may refuse to stop, as Redis does.
func (p *Persister) Shutdown(save bool) error {
	p.wg.Wait()
	if !save {
		return nil
	}
	return p.save(false)
}

// LastSave returns the Unix time, in seconds, of the last successful save,
// or of start-up before any (LASTSAVE).
func (p *Persister) LastSave() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Unix(0, p.lastSave).Unix()
}

// save writes the snapshot file and records the outcome. bg marks a
// background save, whose bgRunning flag it clears when done.
func (p *Persister) save(bg bool) error {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	start := time.Now()
	changes := p.store.Changes()
	now := p.clock()
	stats, err := p.writeFile(now)
	dur := time.Since(start)

	p.mu.Lock()
	p.lastTry = now
	p.lastDuration = dur
	if bg {
		p.bgRunning = false
		p.lastBGDuration = dur
	}
	if err == nil {
		p.lastOK, p.lastErr = true, ""
		p.lastSave = now
		p.changesAtSave = changes
		p.lastSaveKeys, p.lastSaveBytes = stats.Keys, stats.Bytes
		p.saves++
	} else {
		p.lastOK, p.lastErr = false, err.Error()
	}
	p.mu.Unlock()

	kind := "save"
	if bg {
		kind = "background save"
	}
	if err != nil {
		p.log.Error(kind+" failed", "file", p.path, "error", err.Error())
		return err
	}
	p.log.Info(kind+" done", "file", p.path, "keys", stats.Keys, "bytes", stats.Bytes,
		"duration", dur.Round(time.Microsecond).String())
	return nil
}

// writeFile writes the snapshot to a temporary file, fsyncs it, renames it
// over the snapshot and fsyncs the directory. On any failure the temporary
// file is removed and the old snapshot is untouched.
func (p *Persister) writeFile(now int64) (stats WriteStats, err error) {
	f, err := os.CreateTemp(p.cfg.Dir, p.tempPattern())
	if err != nil {
		return stats, fmt.Errorf("snapshot: create temporary file in %s: %w", p.cfg.Dir, err)
	}
	tmp := f.Name()
	renamed := false
	defer func() {
		if !renamed {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	var w io.Writer = bw
	if p.wrap != nil {
		w = p.wrap(w)
	}
	if stats, err = WriteStore(w, p.store, now, nil); err != nil {
		return stats, fmt.Errorf("snapshot: write %s: %w", tmp, err)
	}
	if err = bw.Flush(); err != nil {
		return stats, fmt.Errorf("snapshot: write %s: %w", tmp, err)
	}
	if err = f.Sync(); err != nil {
		return stats, fmt.Errorf("snapshot: fsync %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return stats, fmt.Errorf("snapshot: close %s: %w", tmp, err)
	}
	if err = os.Rename(tmp, p.path); err != nil {
		return stats, fmt.Errorf("snapshot: rename %s to %s: %w", tmp, p.path, err)
	}
	renamed = true
	if err = syncDir(p.cfg.Dir); err != nil {
		// The new snapshot is in place but its name may not survive a
		// power loss: report the save as failed.
		return stats, fmt.Errorf("snapshot: fsync directory %s: %w", p.cfg.Dir, err)
	}
	return stats, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Run makes a background save whenever SaveSeconds have passed since the
// last successful save and something changed since (after a failure it
// retries every 5 s at most). It checks once a second and returns ctx's
// error when ctx is done, without waiting for a save it started (Wait or
// Shutdown does that).
func (p *Persister) Run(ctx context.Context) error {
	t := time.NewTicker(p.checkEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if p.saveDue() {
				_ = p.BGSave() // ErrSaveInProgress: one is running already
			}
		}
	}
}

// saveDue reports whether Run should start a save now.
func (p *Persister) saveDue() bool {
	period := p.saveSeconds.Load()
	if period <= 0 {
		return false
	}
	now := p.clock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bgRunning || p.store.Changes() == p.changesAtSave {
		return false
	}
	if now-p.lastSave < period*int64(time.Second) {
		return false
	}
	return p.lastOK || now-p.lastTry >= int64(retryDelay)
}

// Stats is a point-in-time view of persistence: what INFO persistence
// prints and the metrics package exports.
type Stats struct {
	// ChangesSinceLastSave counts the writes that changed the keyspace since
	// the last successful save began.
	ChangesSinceLastSave uint64
	// BGSaveInProgress is true while a background save runs, and
	// BGSaveElapsed is how long it has run so far (0 when none runs).
	BGSaveInProgress bool
	BGSaveElapsed    time.Duration
	// LastSave is the instant of the last successful save, or of start-up
	// before any.
	LastSave time.Time
	// LastSaveOK reports whether the last save attempt succeeded; if not,
	// LastSaveError is its error (empty after a success).
	LastSaveOK    bool
	LastSaveError string
	// LastSaveDuration is how long the last save attempt took (0 before
	// any), and LastBGSaveDuration the last background save's (-1 before
	// the first).
	LastSaveDuration   time.Duration
	LastBGSaveDuration time.Duration
	// Saves counts the successful saves since start.
	Saves int64
	// LastSaveKeys and LastSaveBytes describe the file the last successful
	// save wrote.
	LastSaveKeys  uint64
	LastSaveBytes int64
	// LoadKeys and LoadExpired count the keys loaded at start-up and those
	// dropped as already expired; LoadDuration is how long the load took.
	LoadKeys     int
	LoadExpired  int
	LoadDuration time.Duration
}

// Stats returns persistence's current figures.
func (p *Persister) Stats() Stats {
	changes := p.store.Changes()
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Stats{
		ChangesSinceLastSave: changes - p.changesAtSave,
		BGSaveInProgress:     p.bgRunning,
		LastSave:             time.Unix(0, p.lastSave),
		LastSaveOK:           p.lastOK,
		LastSaveError:        p.lastErr,
		LastSaveDuration:     p.lastDuration,
		LastBGSaveDuration:   p.lastBGDuration,
		Saves:                p.saves,
		LastSaveKeys:         p.lastSaveKeys,
		LastSaveBytes:        p.lastSaveBytes,
		LoadKeys:             p.loadKeys,
		LoadExpired:          p.loadExpired,
		LoadDuration:         p.loadDuration,
	}
	if p.bgRunning {
		st.BGSaveElapsed = time.Since(p.bgStart)
	}
	return st
}

// InfoFields returns the persistence section of INFO as field/value pairs,
// under Redis's names where Redis has the field: loading,
// rdb_changes_since_last_save, rdb_bgsave_in_progress, rdb_last_save_time,
// rdb_last_bgsave_status, rdb_last_bgsave_time_sec,
// rdb_current_bgsave_time_sec, rdb_saves, rdb_last_load_keys_expired,
// rdb_last_load_keys_loaded, aof_enabled; and cellserver's own
// rdb_last_load_time_ms, rdb_last_save_duration_ms, rdb_last_save_keys,
// rdb_last_save_bytes, rdb_last_save_error (empty after a success). They
// are Stats, formatted.
func (p *Persister) InfoFields() [][2]string {
	st := p.Stats()
	b2i := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	status := "ok"
	if !st.LastSaveOK {
		status = "err"
	}
	current := int64(-1)
	if st.BGSaveInProgress {
		current = int64(st.BGSaveElapsed / time.Second)
	}
	lastBG := int64(-1)
	if st.LastBGSaveDuration >= 0 {
		lastBG = int64((st.LastBGSaveDuration + time.Second/2) / time.Second)
	}
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	return [][2]string{
		{"loading", "0"},
		{"rdb_changes_since_last_save", strconv.FormatUint(st.ChangesSinceLastSave, 10)},
		{"rdb_bgsave_in_progress", b2i(st.BGSaveInProgress)},
		{"rdb_last_save_time", itoa(st.LastSave.Unix())},
		{"rdb_last_bgsave_status", status},
		{"rdb_last_bgsave_time_sec", itoa(lastBG)},
		{"rdb_current_bgsave_time_sec", itoa(current)},
		{"rdb_saves", itoa(st.Saves)},
		{"rdb_last_load_keys_expired", itoa(int64(st.LoadExpired))},
		{"rdb_last_load_keys_loaded", itoa(int64(st.LoadKeys))},
		{"rdb_last_load_time_ms", itoa(st.LoadDuration.Milliseconds())},
		{"rdb_last_save_duration_ms", itoa(st.LastSaveDuration.Milliseconds())},
		{"rdb_last_save_keys", strconv.FormatUint(st.LastSaveKeys, 10)},
		{"rdb_last_save_bytes", itoa(st.LastSaveBytes)},
		{"rdb_last_save_error", oneLine(st.LastSaveError)},
		{"aof_enabled", "0"},
	}
}

// oneLine keeps a value on its INFO line.
func oneLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}
