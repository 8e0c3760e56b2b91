package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cellserver/cellserver/metrics"
	"github.com/cellserver/cellserver/replication"
	"github.com/cellserver/cellserver/resp"
	"github.com/cellserver/cellserver/shards"
)

// shutdownGrace bounds how long a stopping server waits for replies in flight.
const shutdownGrace = 10 * time.Second

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "cellserver:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	// 1. Configuration: the file, then flags over it.
	cfg, opt, err := parseArgs(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil // --help printed the usage
	}
	if err != nil {
		return err
	}
	switch {
	case opt.version:
		fmt.Fprintf(stdout, "cellserver %s\n", resp.Version)
		return nil
	case opt.genDocs:
		_, err := stdout.Write(resp.CommandsMarkdown())
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}

	// 2. Logging.
	level := new(slog.LevelVar)
	l, _ := resp.ParseLogLevel(cfg.LogLevel)
	level.Set(l)
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	// 3. The keyspace and its expiry sweeper.
	store, err := shards.New(shards.Config{Shards: cfg.Shards})
	if err != nil {
		return err
	}
	cfg.Shards = store.NumShards() // CONFIG GET shows the count in use
	clock := func() int64 { return time.Now().UnixNano() }
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	sweepCtx, stopSweep := context.WithCancel(context.Background())
	sweepDone := make(chan struct{})
	go func() {
		defer close(sweepDone)
		if !cfg.Cluster.enabled() { // a cluster node sweeps at its log's time
			store.RunSweeper(sweepCtx, clock, 100*time.Millisecond)
		}
	}()
	defer func() {
		stopSweep()
		<-sweepDone
	}()
	// Freed heap pages go back to the OS once the keyspace stops growing
	// (runtime.go); profiles are served only when asked for.
	trimDone := make(chan struct{})
	go func() {
		defer close(trimDone)
		releaseMemory(sweepCtx, logger)
	}()
	defer func() {
		stopSweep()
		<-trimDone
	}()
	if cfg.PprofAddr != "" {
		_, stopPprof, err := startPprof(cfg.PprofAddr, logger)
		if err != nil {
			return err
		}
		defer stopPprof()
	}

	// 4. Persistence: load the snapshot before serving anything; in
	// cluster mode the raft node restores its own snapshot and log instead
	// (cluster.go), and every write goes through it.
	var backend resp.Backend = resp.NewLocal(store, clock)
	var node *replication.Node
	var persist *persistence // nil in cluster mode
	if cfg.Cluster.enabled() {
		if node, err = startCluster(&cfg, store, logger); err != nil {
			return err
		}
		defer node.Close()
		backend = node
	} else if persist, err = startPersistence(&cfg, store, clock, logger); err != nil {
		return err
	}

	// 5. The RESP server.
	rc := cfg.ServerConfig(level, logger)
	persist.configure(&rc)
	if node != nil {
		rc.Cluster = resp.ClusterOf(node)
	}
	srv, err := resp.NewServer(rc, backend)
	if err != nil {
		return err
	}
	if node != nil {
		resp.RegisterCluster(srv, node)
	}
	ln, err := cfg.listen()
	if err != nil {
		return errors.Join(err, persist.stop(false, logger))
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	logger.Info("cellserver started", "version", resp.Version, "addr", cfg.Addr(), "tls_port", cfg.Ops.TLSPort, "shards", store.NumShards())

	// 6. Metrics, on their own address.
	if cfg.Ops.MetricsAddr != "" {
		src := metrics.Sources{Server: srv, Store: store}
		if persist != nil {
			src.Persistence = persist.p
		}
		if node != nil {
			src.Raft = node
		}
		ms, err := metrics.Listen(cfg.Ops.MetricsAddr, metrics.NewRegistry(src), logger)
		if err != nil {
			srv.Close()
			<-serveErr
			return errors.Join(err, persist.stop(false, logger))
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = ms.Close(ctx)
		}()
	}

	// 7. Serve until a signal or SHUTDOWN; then stop accepting, finish the
	// replies in flight and exit.
	signalled := false
	select {
	case err := <-serveErr:
		return errors.Join(err, persist.stop(false, logger))
	case <-ctx.Done():
		logger.Info("signal received; shutting down")
		signalled = true
	case <-srv.ShutdownRequested():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		logger.Warn("shutdown grace expired; connections closed", "err", err)
	}
	if err := <-serveErr; err != nil && !errors.Is(err, resp.ErrServerClosed) {
		return errors.Join(err, persist.stop(false, logger))
	}
	// A signal saves once every reply in flight is done; SHUTDOWN saved
	// (or skipped the save) itself.
	if err := persist.stop(signalled, logger); err != nil {
		return err
	}
	if node != nil {
		// Leave the cluster's transport before saying we stopped (the
		// deferred Close then has nothing left to do).
		if err := node.Close(); err != nil {
			logger.Warn("closing the raft node", "err", err)
		}
	}
	logger.Info("cellserver stopped")
	return nil
}
