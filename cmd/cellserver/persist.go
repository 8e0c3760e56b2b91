package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/cellserver/cellserver/resp"
	"github.com/cellserver/cellserver/shards"
	"github.com/cellserver/cellserver/snapshot"
)

// persistDirectives are the standalone persistence settings of the
// directive table (redis.conf names).
var persistDirectives = []directive{
	{name: "dir", field: func(c *Config) any { return &c.Persist.Dir }},
	{name: "dbfilename", field: func(c *Config) any { return &c.Persist.DBFilename }},
	{name: "save", field: func(c *Config) any { return &saveField{c} }},
	{name: "snapshot-ignore-corrupt", field: func(c *Config) any { return &c.Persist.IgnoreCorrupt }},
}

// saveField is the save directive's field: setting.Spec.Set hands its
// text to Set. "" (Redis's way to turn snapshots off) makes the server run
// in memory only; anything else is a save period for parseSave.
type saveField struct{ c *Config }

func (f *saveField) Set(v string) error {
	if strings.TrimSpace(v) == "" {
		f.c.InMemory, f.c.Persist.SaveSeconds = true, 0
		return nil
	}
	n, err := parseSave(v)
	if err != nil {
		return err
	}
	f.c.InMemory, f.c.Persist.SaveSeconds = false, n
	return nil
}

// String is the save directive as it was set: "" for memory only, else
// the period in seconds (0: no periodic saves).
func (f *saveField) String() string {
	if f.c.InMemory {
		return ""
	}
	return strconv.Itoa(f.c.Persist.SaveSeconds)
}

// parseSave reads a save period: "<seconds>" (0: no periodic saves), or
// Redis's "<seconds> <changes>" pairs, of which the first pair's seconds
// count (cellserver saves after any change). "" is not a period: it is
// the choice to run in memory only, made at start (saveField).
func parseSave(v string) (int, error) {
	f := strings.Fields(v)
	if len(f) == 0 {
		return 0, errSaveOffAtStart
	}
	if len(f) > 1 && len(f)%2 != 0 {
		return 0, fmt.Errorf("save: expected <seconds> or <seconds> <changes> pairs, got %q", v)
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 0 {
		return 0, fmt.Errorf("save: %q is not a number of seconds", f[0])
	}
	for _, c := range f[1:] {
		if _, err := strconv.Atoi(c); err != nil {
			return 0, fmt.Errorf("save: %q is not an integer", c)
		}
	}
	return n, nil
}

// The refusals of CONFIG SET save that would change whether the server
// persists at all: that is chosen at start.
var (
	errSaveOffAtStart = errors.New(`save: "" (in memory only: no snapshot loaded or written) is chosen at start; ` +
		`CONFIG SET save 0 turns periodic saves off, SHUTDOWN NOSAVE skips the final save`)
	errInMemory = errors.New(`save: the server runs in memory only (started with save ""); restart it with save <seconds> to persist`)
)

// configureInMemory gives a server started with save "" (in memory only)
// its persistence settings for CONFIG GET and SET: save stays "".
func configureInMemory(rc *resp.Config, cfg *Config) {
	rc.Settings = append(rc.Settings,
		resp.Setting{Name: "dir", Get: func() string { return cfg.Persist.Dir }},
		resp.Setting{Name: "dbfilename", Get: func() string { return cfg.Persist.DBFilename }},
		resp.Setting{Name: "save", Get: func() string { return "" }, Set: func(v string) error {
			if strings.TrimSpace(v) != "" {
				return errInMemory
			}
			return nil
		}},
	)
}

// persistence is the running standalone persistence: the Persister and the
// goroutine of its periodic saves.
type persistence struct {
	p      *snapshot.Persister
	cancel context.CancelFunc
	done   chan struct{}
}

// startPersistence loads the snapshot (before anything is served) and
// starts the periodic saver. A corrupt snapshot stops start-up with an
// error naming the file, what is wrong and the flag that starts empty.
func startPersistence(cfg *Config, store *shards.Store, clock func() int64, logger *slog.Logger) (*persistence, error) {
	p, err := snapshot.Open(cfg.Persist, store, clock, logger)
	if err != nil {
		if errors.Is(err, snapshot.ErrCorrupt) {
			return nil, fmt.Errorf("%w (the file is left as it is; start with --snapshot-ignore-corrupt yes to move it aside and start empty)", err)
		}
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	ps := &persistence{p: p, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(ps.done)
		_ = p.Run(ctx) // returns when stop cancels it
	}()
	return ps, nil
}

// configure hands the Persister to the RESP server (SAVE, BGSAVE, LASTSAVE,
// SHUTDOWN, INFO persistence) with its CONFIG GET/SET settings.
func (ps *persistence) configure(rc *resp.Config) {
	if ps == nil { // cluster mode: raft snapshots instead
		return
	}
	p := ps.p
	rc.Persistence = p
	rc.Settings = append(rc.Settings,
		resp.Setting{Name: "dir", Get: p.Dir},
		resp.Setting{Name: "dbfilename", Get: p.DBFilename},
		resp.Setting{Name: "save", Get: func() string {
			if n := p.SaveSeconds(); n > 0 {
				return strconv.Itoa(n) + " 1"
			}
			return "0"
		}, Set: func(v string) error {
			n, err := parseSave(v)
			if err != nil {
				return err
			}
			return p.SetSaveSeconds(n)
		}},
	)
}

// stop ends the periodic saver, waits for a background save in flight and,
// with save (a SIGTERM or SIGINT), writes the final snapshot. SHUTDOWN has
// made (or, with NOSAVE, skipped) its own save already.
func (ps *persistence) stop(save bool, logger *slog.Logger) error {
	if ps == nil {
		return nil
	}
	ps.cancel()
	<-ps.done
	if err := ps.p.Shutdown(save); err != nil {
		return fmt.Errorf("final save: %w", err)
	}
	if save {
		logger.Info("final snapshot saved", "file", ps.p.Path())
	}
	return nil
}
