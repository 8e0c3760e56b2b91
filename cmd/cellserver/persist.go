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
	{name: "save", field: func(c *Config) any { return (*savePeriod)(&c.Persist.SaveSeconds) }},
	{name: "snapshot-ignore-corrupt", field: func(c *Config) any { return &c.Persist.IgnoreCorrupt }},
}

// savePeriod is the save directive's field: setting.Spec.Set hands its
// text to Set, which parses it with parseSave.
type savePeriod int

func (p *savePeriod) Set(v string) error {
	n, err := parseSave(v)
	if err != nil {
		return err
	}
	*p = savePeriod(n)
	return nil
}

// String is the period as the save directive writes it ("" when off).
func (p *savePeriod) String() string {
	if *p == 0 {
		return ""
	}
	return strconv.Itoa(int(*p))
}

// parseSave reads a save period: "" (off), "<seconds>", or Redis's
// "<seconds> <changes>" pairs, of which the first pair's seconds count
// (cellserver saves after any change).
func parseSave(v string) (int, error) {
	f := strings.Fields(v)
	if len(f) == 0 {
		return 0, nil
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
			return ""
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
