package main

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// gcraScript is the Lua GCRA loaded with SCRIPT LOAD for the lua-gcra preset.
//
//go:embed gcra.lua
var gcraScript string

// ioBufSize is the size of each connection's bufio reader and writer: large
// enough for a deep pipeline to go out in one write and come back in few reads.
const ioBufSize = 64 << 10

// dialTimeout bounds connection set-up; replyGrace bounds how long after the
// end of a timed round a reply may still take before the round fails.
const (
	dialTimeout = 5 * time.Second
	replyGrace  = 30 * time.Second
)

// target is one server and the command line sent to it.
type target struct {
	Label string // "A" or "B"
	Addr  string
	Cmd   string
	// KeyPrefix starts every key sent to this target.
	KeyPrefix string
	// Keys is the size of this target's keyspace.
	Keys int
	tmpl *template
}

// conn is one connection with its buffers.
type conn struct {
	nc net.Conn
	w  *bufio.Writer
	rr replyReader
}

// dial opens a connection and authenticates it when auth is set.
func dial(ctx context.Context, addr, auth string) (*conn, error) {
	d := net.Dialer{Timeout: dialTimeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true) // the default, stated: a pipeline goes out at once
	}
	c := &conn{
		nc: nc,
		w:  bufio.NewWriterSize(nc, ioBufSize),
		rr: replyReader{r: bufio.NewReaderSize(nc, ioBufSize)},
	}
	if auth != "" {
		if _, err := do(c.w, &c.rr, "AUTH", auth); err != nil {
			nc.Close()
			return nil, fmt.Errorf("auth %s: %w", addr, err)
		}
	}
	return c, nil
}

// prepare compiles the target's command, loading the Lua script first when
// the command refers to {sha}.
func prepare(ctx context.Context, cfg *Config, t *target) error {
	sha := ""
	if usesSHA(t.Cmd) {
		src := gcraScript
		if cfg.Script != "" {
			b, err := os.ReadFile(cfg.Script)
			if err != nil {
				return fmt.Errorf("read script: %w", err)
			}
			src = string(b)
		}
		c, err := dial(ctx, t.Addr, cfg.Auth)
		if err != nil {
			return err
		}
		defer c.nc.Close()
		v, err := do(c.w, &c.rr, "SCRIPT", "LOAD", src)
		if err != nil {
			return fmt.Errorf("script load on %s: %w", t.Addr, err)
		}
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("script load on %s: reply %v is not a digest", t.Addr, v)
		}
		sha = s
	}
	tmpl, err := parseTemplate(t.Cmd, sha)
	if err != nil {
		return err
	}
	t.tmpl = tmpl
	return nil
}

// phase says when the workers stop and whether they record.
type phase struct {
	duration time.Duration // a timed phase stops after the first pipeline that ends this long after its start
	deadline time.Time     // set by runPhase: the start plus duration
	budget   *atomic.Int64 // requests left to send, shared; nil for a timed phase
	record   bool
}

// worker drives one connection. Its histogram and counters are its own, so
// the hot path takes no lock.
type worker struct {
	c        *conn
	tmpl     *template
	keys     *keyGen
	pipeline int
	hist     *hdrhistogram.Histogram
	requests int64
	errors   int64
	firstErr string
	buf      []byte
	key      []byte
}

// run sends pipelines until the phase ends. Each request's latency is the
// time from the flush of its pipeline to the moment its reply has been read.
func (w *worker) run(ph phase, abort *atomic.Bool) error {
	for !abort.Load() {
		n := w.pipeline
		if ph.budget != nil {
			left := ph.budget.Add(-int64(n))
			if left+int64(n) <= 0 {
				return nil
			}
			if left < 0 {
				n += int(left)
			}
		} else if !time.Now().Before(ph.deadline) {
			return nil
		}
		w.buf = w.buf[:0]
		for range n {
			w.key = w.keys.appendKey(w.key[:0], w.keys.next())
			w.buf = w.tmpl.appendCommand(w.buf, w.key)
		}
		if _, err := w.c.w.Write(w.buf); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		start := time.Now()
		if err := w.c.w.Flush(); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		for range n {
			isErr, msg, err := w.c.rr.skip()
			if err != nil {
				return fmt.Errorf("read reply: %w", err)
			}
			if !ph.record {
				continue
			}
			_ = w.hist.RecordValue(int64(time.Since(start)))
			w.requests++
			if isErr {
				w.errors++
				if w.firstErr == "" {
					w.firstErr = string(msg)
				}
			}
		}
	}
	return nil
}

// runPhase runs every worker through one phase and returns its wall time.
// Cancelling ctx closes the connections, which ends the workers.
func runPhase(ctx context.Context, workers []*worker, ph phase) (time.Duration, error) {
	var abort atomic.Bool
	done := make(chan struct{})
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		select {
		case <-ctx.Done():
			abort.Store(true)
			for _, w := range workers {
				w.c.nc.Close()
			}
		case <-done:
		}
	}()
	// The deadline counts from the instant elapsed does, so a timed phase
	// never reports less wall time than it was asked for.
	start := time.Now()
	ph.deadline = start.Add(ph.duration)
	if ph.budget == nil {
		for _, w := range workers {
			_ = w.c.nc.SetDeadline(ph.deadline.Add(replyGrace))
		}
	}
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.run(ph, &abort); err != nil {
				abort.Store(true)
				errs[i] = fmt.Errorf("connection %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(done)
	watch.Wait()
	if err := ctx.Err(); err != nil {
		return elapsed, err
	}
	return elapsed, errors.Join(errs...)
}

// roundResult is one measured round against one target.
type roundResult struct {
	Figures
	hist     *hdrhistogram.Histogram
	firstErr string
}

// runRound opens conns connections to t, warms up, then measures one round.
// Rounds with the same seed and round number draw the same key sequence, so
// the two sides of a comparison see the same load.
func runRound(ctx context.Context, cfg *Config, t *target, conns, round int, logger *slog.Logger) (roundResult, error) {
	workers := make([]*worker, 0, conns)
	defer func() {
		for _, w := range workers {
			w.c.nc.Close()
		}
	}()
	for i := range conns {
		c, err := dial(ctx, t.Addr, cfg.Auth)
		if err != nil {
			return roundResult{}, err
		}
		seed := cfg.Seed*1_000_003 + uint64(round)*65_537 + uint64(i)
		kg, err := newKeyGen(cfg.Dist, cfg.ZipfS, t.Keys, t.KeyPrefix, seed)
		if err != nil {
			c.nc.Close()
			return roundResult{}, err
		}
		workers = append(workers, &worker{
			c:        c,
			tmpl:     t.tmpl,
			keys:     kg,
			pipeline: cfg.Pipeline,
			hist:     newHistogram(),
			buf:      make([]byte, 0, 4096),
			key:      make([]byte, 0, 64),
		})
	}
	if cfg.Warmup > 0 {
		if _, err := runPhase(ctx, workers, phase{duration: cfg.Warmup}); err != nil {
			return roundResult{}, fmt.Errorf("%s %s: warm-up: %w", t.Label, t.Addr, err)
		}
	}
	ph := phase{record: true}
	if cfg.Requests > 0 {
		ph.budget = new(atomic.Int64)
		ph.budget.Store(cfg.Requests)
	} else {
		ph.duration = cfg.Duration
	}
	elapsed, err := runPhase(ctx, workers, ph)
	if err != nil {
		return roundResult{}, fmt.Errorf("%s %s: %w", t.Label, t.Addr, err)
	}
	var requests, errs int64
	hists := make([]*hdrhistogram.Histogram, len(workers))
	res := roundResult{}
	for i, w := range workers {
		requests += w.requests
		errs += w.errors
		hists[i] = w.hist
		if res.firstErr == "" {
			res.firstErr = w.firstErr
		}
	}
	res.hist = mergeHistograms(hists...)
	res.Figures = figuresOf(res.hist, requests, errs, elapsed)
	logger.Info("round", "target", t.Label, "addr", t.Addr, "cmd", t.tmpl.name, "c", conns, "P", cfg.Pipeline,
		"round", round+1, "rps", int64(res.Throughput), "p50_us", res.P50, "p99_us", res.P99, "errors", errs)
	return res, nil
}
