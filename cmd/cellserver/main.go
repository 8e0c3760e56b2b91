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
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/clientmem"
	"github.com/cellserver/cellserver/internal/setting"
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

// run is the whole program: it returns what went wrong rather than exiting,
// so main alone chooses the exit code.
func run(args []string, stdout, stderr io.Writer) error {
	// 1. Configuration: the file, then flags over it.
	cfg, opt, err := parseArgs(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil // --help printed the usage
	}
	if err != nil {
		return err
	}
	if opt.version || opt.genDocs || opt.genConfigDocs || opt.genSampleConfig {
		return printAbout(opt, stdout)
	}
	if opt.assignSlots != "" {
		if err := cfg.readSecretFiles(); err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return assignSlots(ctx, opt.assignSlots, cfg.RequirePass, stdout)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	// 1b. Secrets given as files (requirepass-file, ...), never on the
	// command line.
	if err := cfg.readSecretFiles(); err != nil {
		return err
	}

	// 2. Logging, and file descriptors for maxclients clients (or fewer
	// clients).
	level, logger := newLogger(cfg.LogLevel, stderr)
	if err := fitMaxClients(&cfg, logger); err != nil {
		return err
	}
	// 2b. The Go runtime's memory limit, from maxmemory, maxmemory-clients
	// and the container's limit (memlimit.go); the runtime's own is back in
	// place on return.
	clients, _ := clientmem.ParseLimit(cfg.Ops.MaxMemoryClients) // checked by Validate
	defer setMemoryLimit(cfg.Ops.MaxMemory, clients.Bytes(cfg.Ops.MaxMemory), logger)()
	return serve(&cfg, level, logger)
}

// printAbout writes what --version, --gen-docs or --gen-config-docs asks
// for to stdout.
func printAbout(opt options, stdout io.Writer) error {
	if opt.version {
		fmt.Fprintf(stdout, "cellserver %s\n", resp.Version)
		return nil
	}
	if opt.genConfigDocs {
		_, err := stdout.Write(setting.Markdown())
		return err
	}
	if opt.genSampleConfig {
		_, err := stdout.Write(setting.SampleConf())
		return err
	}
	_, err := stdout.Write(resp.CommandsMarkdown())
	return err
}

// newLogger returns the server's logger, writing text to stderr, and the
// level CONFIG SET loglevel changes.
func newLogger(logLevel string, stderr io.Writer) (*slog.LevelVar, *slog.Logger) {
	level := new(slog.LevelVar)
	l, _ := setting.ParseLogLevel(logLevel)
	level.Set(l)
	return level, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
}

// serve starts the server cfg describes, serves until a signal or SHUTDOWN
// and stops it. Everything it starts is stopped in the reverse order.
func serve(cfg *Config, level *slog.LevelVar, logger *slog.Logger) error {
	// CONFIG REWRITE writes the configuration as given, not as start-up
	// filled it in.
	given := *cfg

	// 3. The keyspace and its background work.
	store, err := shards.New(shards.Config{Shards: cfg.Shards})
	if err != nil {
		return err
	}
	cfg.Shards = store.NumShards() // CONFIG GET shows the count in use
	clock := func() int64 { return time.Now().UnixNano() }
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// As Redis: a hang-up of the terminal does not stop the server (TLS
	// certificates and the rate-limit service's rules, when on, are
	// reloaded on SIGHUP instead).
	signal.Ignore(syscall.SIGHUP)
	stopBackground, err := startBackground(cfg, store, clock, logger)
	if err != nil {
		return err
	}
	defer stopBackground()

	// 3b. tls-port's certificates, reloaded on SIGHUP and CONFIG SET
	// (tlsreload.go).
	stopTLS, err := startTLS(cfg, logger)
	if err != nil {
		return err
	}
	defer stopTLS()

	// 4. Persistence or the cluster node.
	st, err := startStorage(cfg, store, clock, logger)
	if err != nil {
		return err
	}
	if st.node != nil {
		defer st.node.Close()
	}
	stopRegion, err := st.startRegion(cfg, logger)
	if err != nil {
		return st.abort(err, logger)
	}
	defer stopRegion()
	// 4a. The decision path, assembled once: every front door below gets
	// this same one (decide.Path).
	st.assemble(cfg)

	// 4b. Envoy's rate-limit service over the same backend, on its own
	// port (rls.go); before the RESP server, which reaches it through
	// CONFIG SET rls-config.
	if err := st.startRLS(cfg, logger); err != nil {
		return st.abort(err, logger)
	}
	defer st.stopRLS(logger)

	// 5. The RESP server.
	srv, serveErr, err := startServer(cfg, &given, level, logger, st)
	if err != nil {
		return err
	}
	st.followMemory(srv) // the rate-limit service obeys maxmemory too

	// 6. Metrics, on their own address.
	closeMetrics, err := startMetrics(cfg, srv, st, logger)
	if err != nil {
		srv.Close()
		<-serveErr
		return st.abort(err, logger)
	}
	defer closeMetrics()

	// 7. Serve until a signal or SHUTDOWN; then stop accepting, finish the
	// replies in flight and exit.
	return st.waitAndStop(ctx, srv, serveErr, logger)
}

// startTLS loads the tls-* files into a reloader (cfg.Ops.certs) that the
// listeners, the rate-limit service and the raft port share, and reloads
// them on SIGHUP until the returned function is called. Without tls-port,
// tls-replication and tls-cluster it does nothing.
func startTLS(cfg *Config, logger *slog.Logger) (stop func(), err error) {
	if cfg.Ops.TLSPort == 0 && !cfg.Cluster.tlsOn() {
		return func() {}, nil
	}
	certs, err := newCertReloader(&cfg.Ops, logger)
	if err != nil {
		return nil, err
	}
	cfg.Ops.certs = certs
	return certs.watchSIGHUP(), nil
}

// startBackground starts the expiry sweeper (standalone only: a cluster node
// sweeps at its log's time), the memory trimmer and, when configured, the
// pprof server. The returned function stops them and waits for them.
func startBackground(cfg *Config, store *shards.Store, clock func() int64, logger *slog.Logger) (stop func(), err error) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	if !cfg.Cluster.enabled() {
		wg.Go(func() { store.RunSweeper(ctx, clock, 100*time.Millisecond) })
	}
	// Freed heap pages go back to the OS once the keyspace stops growing
	// (runtime.go); profiles are served only when asked for.
	wg.Go(func() { releaseMemory(ctx, logger) })
	stopPprof := func() {}
	if cfg.PprofAddr != "" {
		if _, stopPprof, err = startPprof(cfg.PprofAddr, logger); err != nil {
			cancel()
			wg.Wait()
			return nil, err
		}
	}
	return func() {
		stopPprof()
		cancel()
		wg.Wait()
	}, nil
}

// storage is where commands run: the keyspace itself with its persistence,
// or, in cluster mode, the raft node in front of it.
type storage struct {
	store    *shards.Store
	backend  decide.Backend    // below the rules: the region gate, the node or Local
	path     *decide.Path      // the decision path every door is handed (assemble)
	node     *replication.Node // nil standalone
	persist  *persistence      // nil in cluster mode and in memory only
	inMemory bool              // standalone without persistence (save "")
	rls      *rlsServer        // nil unless rls-port is set (rls.go)
	// stopping is set once a signal asked the server to stop (/readyz).
	stopping atomic.Bool
}

// startStorage starts the raft node in cluster mode, which restores its own
// snapshot and log (cluster.go) and takes every write. Standalone, it loads
// the snapshot, before anything is served, and starts the periodic saves.
func startStorage(cfg *Config, store *shards.Store, clock func() int64, logger *slog.Logger) (*storage, error) {
	if cfg.Cluster.enabled() {
		node, err := startCluster(cfg, store, logger)
		if err != nil {
			return nil, err
		}
		return &storage{store: store, backend: node, node: node}, nil
	}
	st := &storage{store: store, backend: decide.NewLocal(store, clock), inMemory: cfg.InMemory}
	if cfg.InMemory {
		logger.Info(`running in memory only (save ""): no snapshot is loaded or written`)
		return st, nil
	}
	persist, err := startPersistence(cfg, store, clock, logger)
	if err != nil {
		return nil, err
	}
	st.persist = persist
	return st, nil
}

// assemble builds the decision path over what startStorage and
// startRegion started: the rules of limit-override and limit-shadow, the
// region gate (when a region is configured) in front of the node or the
// local keyspace, and, in a cluster, the routing across its groups through
// that gate.
func (st *storage) assemble(cfg *Config) {
	p := &decide.Path{
		Rules:   decide.Rules{Policy: cfg.Ops.limitPolicy(), Parse: engine.ParseOptions{MaxLogLimit: cfg.SLMaxLimit}},
		Backend: st.backend,
	}
	if st.node != nil {
		var gate decide.Gate
		if g := cfg.Region.gate; g != nil {
			gate = g
		}
		p.Groups = decide.NewGroups(st.node, gate)
	}
	st.path = p
}

// abort returns err joined with whatever stopping the persistence, without a
// final save, reports: the way out when serving fails.
func (st *storage) abort(err error, logger *slog.Logger) error {
	return errors.Join(err, st.persist.stop(false, logger))
}

// startServer builds the RESP server over st and starts serving on cfg's
// listeners. Its Serve result arrives on the returned channel. given is the
// configuration as parsed, which CONFIG REWRITE writes.
func startServer(cfg, given *Config, level *slog.LevelVar, logger *slog.Logger, st *storage) (*resp.Server, <-chan error, error) {
	rc := cfg.ServerConfig(level, logger)
	rc.RewriteConfig = given.rewriter()
	if certs := cfg.Ops.certs; certs != nil {
		rc.Settings = append(rc.Settings, certs.settings()...)
		rc.TLSHandshakeFailures = certs.failures.Load
	}
	st.persist.configure(&rc)
	if st.inMemory {
		configureInMemory(&rc, cfg)
	}
	if st.node != nil {
		rc.Cluster = replication.NewClusterView(st.node)
		rc.ReplicateSetting = replicateSetting(st.node, cfg.Cluster.Raft.NoLeaderTimeout+5*time.Second)
	}
	rc.Regions = cfg.Region.gate
	rc.Policy, rc.Parse = st.path.Rules.Policy, st.path.Rules.Parse
	srv, err := resp.NewServer(rc, st.path.Backend)
	if err != nil {
		return nil, nil, err
	}
	// The waiters in concurrency keys' lines (CC.ACQUIRE … WAIT) whose
	// connections this server holds are answered when an op applied
	// here, decided by this node or another of its group, grants them.
	st.store.SetGrantHook(resp.GrantHook(srv))
	if st.node != nil {
		resp.RegisterCluster(srv, st.node)
	}
	if g := cfg.Region.gate; g != nil {
		resp.RegisterRegions(srv, g)
	}
	ln, err := cfg.listen()
	if err != nil {
		return nil, nil, st.abort(err, logger)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	attrs := append([]any{"version", resp.Version}, ln.logAttrs()...)
	logger.Info("cellserver started", append(attrs, "shards", st.store.NumShards())...)
	if w := cfg.protectedModeWarning(); w != "" {
		logger.Warn(w, "bind", cfg.Bind)
	}
	return srv, serveErr, nil
}

// startMetrics serves the metrics on cfg.Ops.MetricsAddr when it is set. The
// returned function closes that server.
func startMetrics(cfg *Config, srv *resp.Server, st *storage, logger *slog.Logger) (closeMetrics func(), err error) {
	if cfg.Ops.MetricsAddr == "" {
		return func() {}, nil
	}
	src := metrics.Sources{Server: srv, Store: st.store}
	if st.persist != nil {
		src.Persistence = st.persist.p
	}
	if st.node != nil {
		src.Raft = st.node
	}
	if st.rls != nil {
		src.RLS = cfg.RLS.svc
	}
	if g := cfg.Region.gate; g != nil {
		src.Regions = g
	}
	ms, err := metrics.Listen(cfg.Ops.MetricsAddr, metrics.NewRegistry(src), st.readiness(srv), logger)
	if err != nil {
		return nil, err
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = ms.Close(ctx)
	}, nil
}

// readiness is what /readyz answers. Standalone, the snapshot is loaded
// before the metrics listen, so the server is ready while it serves: until
// it starts stopping. A cluster member is ready when it knows a leader and
// has applied the log up to it (metrics.RaftReadiness), and also not once it
// starts stopping.
func (st *storage) readiness(srv *resp.Server) metrics.Readiness {
	var member metrics.Readiness
	if st.node != nil {
		member = metrics.RaftReadiness(st.node)
	}
	return func() error {
		if st.stopping.Load() {
			return errStopping
		}
		select {
		case <-srv.ShutdownRequested():
			return errStopping
		default:
		}
		if member != nil {
			return member()
		}
		return nil
	}
}

// errStopping is /readyz's reason while the server shuts down.
var errStopping = errors.New("shutting down")

// waitAndStop waits for a signal (ctx), SHUTDOWN or the end of Serve. On the
// first two it stops accepting, finishes the replies in flight, saves on a
// signal and leaves the cluster.
func (st *storage) waitAndStop(ctx context.Context, srv *resp.Server, serveErr <-chan error, logger *slog.Logger) error {
	signalled := false
	select {
	case err := <-serveErr:
		return st.abort(err, logger)
	case <-ctx.Done():
		logger.Info("signal received; shutting down")
		signalled = true
		st.stopping.Store(true)
	case <-srv.ShutdownRequested():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		logger.Warn("shutdown grace expired; connections closed", "err", err)
	}
	st.stopRLS(logger)
	if err := <-serveErr; err != nil && !errors.Is(err, resp.ErrServerClosed) {
		return st.abort(err, logger)
	}
	// A signal saves once every reply in flight is done; SHUTDOWN saved
	// (or skipped the save) itself.
	if err := st.persist.stop(signalled, logger); err != nil {
		return err
	}
	if st.node != nil {
		// Leave the cluster's transport before saying we stopped (the
		// deferred Close then has nothing left to do).
		if err := st.node.Close(); err != nil {
			logger.Warn("closing the raft node", "err", err)
		}
	}
	logger.Info("cellserver stopped")
	return nil
}
