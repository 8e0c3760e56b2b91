package resp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/acllog"
	"github.com/cellserver/cellserver/internal/authguard"
	"github.com/cellserver/cellserver/internal/clientmem"
	"github.com/cellserver/cellserver/internal/hotkeys"
	"github.com/cellserver/cellserver/internal/keyclass"
	"github.com/cellserver/cellserver/internal/latency"
	"github.com/cellserver/cellserver/internal/limitpolicy"
	"github.com/cellserver/cellserver/internal/maxmemory"
	"github.com/cellserver/cellserver/internal/outlimit"
	"github.com/cellserver/cellserver/internal/serverstats"
	"github.com/cellserver/cellserver/internal/setting"
	"github.com/cellserver/cellserver/internal/slowlog"
	"github.com/cellserver/cellserver/internal/version"
	"github.com/cellserver/cellserver/internal/violations"
	"github.com/cellserver/cellserver/internal/waiters"
	"github.com/cellserver/cellserver/region"
	"github.com/cellserver/cellserver/replication"
)

// Version is cellserver's version, reported by HELLO, INFO and --version:
// the release or commit of this build (internal/version).
// Set once at start-up, never written.
var Version = version.String()

// redisVersion is the Redis protocol level cellserver answers as, in INFO's
// redis_version (client libraries read it to pick features).
const redisVersion = "7.2.0"

// ErrServerClosed is returned by Serve and ListenAndServe after Close or
// Shutdown.
var ErrServerClosed = errors.New("resp: server closed")

// Config configures a Server. Start from DefaultConfig.
//
// A field named after a setting (in parentheses) holds its value: the
// settings table (internal/setting, docs/configuration.md) documents each
// one's meaning, default and range, and words Validate's range errors.
// Those marked live can be changed by CONFIG SET.
type Config struct {
	// Addr is the TCP address to listen on ("127.0.0.1:6379"; bind, port).
	Addr string
	// RequirePass is the default user's password (requirepass; empty:
	// none), and ProtectedMode refuses clients from other hosts while it is
	// empty (protected-mode). Live; read for each new connection.
	RequirePass   string
	ProtectedMode bool
	MaxClients    int // maxclients; live
	// EventLoops is how many event loops serve plaintext TCP connections
	// (io-threads; loop.go); 0 gives every connection a goroutine of its
	// own. Ignored with a Cluster: its writes wait on raft commits, and a
	// loop must never wait. TLS connections always have their own goroutine.
	EventLoops int
	// FitClients, when not nil, is asked by CONFIG SET maxclients whether
	// the process can serve n clients (it may raise the descriptor limit);
	// its error refuses the new value and is shown to the client.
	FitClients func(n int) error
	// Timeout (timeout) and QueryTimeout (client-query-timeout) are whole
	// seconds on the wire; 0: none. Live.
	Timeout      time.Duration
	QueryTimeout time.Duration
	MaxBulkLen   int // proto-max-bulk-len, bytes; live
	// MaxArgs bounds the arguments of one command (the multibulk length).
	MaxArgs          int
	QueryBufferLimit int // client-query-buffer-limit, bytes; live
	// TxMaxCommands and TxMaxBytes bound one transaction's queue
	// (transaction-max-commands, transaction-max-bytes; tx.go). Live.
	TxMaxCommands int
	TxMaxBytes    int64
	// MaxWait and MaxWaiting bound WAIT (max-wait, max-waiting; wait.go).
	// Live.
	MaxWait    time.Duration
	MaxWaiting int64
	// SlowlogSlowerThan (microseconds) and SlowlogMaxLen are
	// slowlog-log-slower-than and slowlog-max-len. Live.
	SlowlogSlowerThan int64
	SlowlogMaxLen     int
	// MaxMemory (maxmemory, bytes; 0: none), MemoryPolicy
	// (maxmemory-policy) and MaxMemoryClients (maxmemory-clients;
	// clientmem.go, following MaxMemory when relative). Live.
	MaxMemory        int64
	MemoryPolicy     maxmemory.Policy
	MaxMemoryClients clientmem.Limit
	// MemoryCheckInterval is how often MaxMemory is checked (> 0).
	MemoryCheckInterval time.Duration
	HotkeysCapacity     int // hotkeys-capacity (hotkeys.go); live
	// MetricsClasses and MetricsClassLimit choose the key classes limiter
	// decisions are counted under (metrics-class, metrics-class-limit;
	// classes.go). Live.
	MetricsClasses    keyclass.Rules
	MetricsClassLimit int
	// InfoSections are extra INFO sections (after the built-in ones), of
	// the parts wired beside the server (the rate-limit service's rls).
	InfoSections []serverstats.Section
	// OutputLimits is client-output-buffer-limit (outbuf.go). Live.
	OutputLimits outlimit.Limits
	// Parse holds the limits limiter requests are parsed with (the sliding
	// log's maximum limit).
	Parse engine.ParseOptions
	// Logger receives the server's logs; nil uses slog.Default().
	Logger *slog.Logger
	// LogLevel, when not nil, is the level CONFIG GET/SET loglevel reads and
	// changes.
	LogLevel *slog.LevelVar
	// Now is the server's clock in Unix ns (TIME, uptime); nil uses the
	// system clock. Limiter decisions take their time from the Backend.
	Now func() int64
	// Persistence saves the keyspace; nil means persistence is off.
	Persistence Persistence
	// Cluster describes the node's replication role; nil means standalone.
	Cluster Cluster
	// Regions is the region layer in front of the Backend (INFO regions);
	// nil means no region is configured.
	Regions *region.Gate
	// Settings are extra CONFIG GET/SET parameters (for example shards, dir,
	// save). A setting named like a built-in fallback (save, dir,
	// dbfilename, appendonly) replaces it; any other duplicate is an error.
	Settings []Setting
	// ConfigFile is the configuration file the server started with (INFO).
	ConfigFile string
	// RewriteConfig writes the settings in force into ConfigFile (CONFIG
	// REWRITE); live returns the value CONFIG GET shows of a setting this
	// server changes live (ok false for any other). nil, or no ConfigFile:
	// CONFIG REWRITE is refused. Called on the command's connection, one
	// call at a time.
	RewriteConfig func(live func(name string) (value string, ok bool)) error
	// Policy holds the limit-override and limit-shadow rules applied to
	// every limiter request this node receives, the decision path's rules
	// stage (decide.Rules, with Parse); nil: a fresh, empty one.
	Policy *limitpolicy.Policy
	// ReplicateSetting, when set, makes CONFIG SET of limit-override and
	// limit-shadow group-wide: it is called with the checked value in its
	// canonical form and returns once every node applies it (the cluster
	// commits it to the group's log, whose apply sets Policy on each
	// node), or why not (a follower refuses, naming the leader). nil:
	// CONFIG SET applies to Policy directly (standalone).
	ReplicateSetting func(name, value string) error
	// Violations is the violations log (violations-log); nil: one that
	// logs to Logger as Addr.
	Violations *violations.Log
	// TLSHandshakeFailures, when set, counts the TLS handshakes the
	// listener saw fail (INFO stats tls_handshake_failures, Stats); safe
	// for concurrent calls.
	TLSHandshakeFailures func() int64
}

// DefaultConfig returns the configuration of a server on 127.0.0.1:6379
// with the settings table's defaults (Redis's, where Redis has the
// setting).
func DefaultConfig() Config {
	n := func(name string) int64 { return setting.Must(name).DefaultInt() }
	return Config{
		Addr:                "127.0.0.1:6379",
		ProtectedMode:       true,
		MaxClients:          int(n("maxclients")),
		EventLoops:          DefaultEventLoops(),
		MaxBulkLen:          int(n("proto-max-bulk-len")),
		MaxArgs:             defaultMaxArgs,
		QueryBufferLimit:    int(n("client-query-buffer-limit")),
		QueryTimeout:        time.Duration(n("client-query-timeout")) * time.Second,
		TxMaxCommands:       int(n("transaction-max-commands")),
		TxMaxBytes:          n("transaction-max-bytes"),
		MaxWait:             time.Duration(n("max-wait")),
		MaxWaiting:          n("max-waiting"),
		SlowlogSlowerThan:   n("slowlog-log-slower-than"),
		SlowlogMaxLen:       int(n("slowlog-max-len")),
		MaxMemoryClients:    clientmem.DefaultLimit(),
		MemoryCheckInterval: maxmemory.DefaultCheckInterval,
		HotkeysCapacity:     int(n("hotkeys-capacity")),
		MetricsClassLimit:   int(n("metrics-class-limit")),
		OutputLimits:        outlimit.Default(),
		Parse:               engine.DefaultParseOptions(),
	}
}

// OverMemory reports whether the keyspace is over maxmemory under the
// noeviction policy, so that writes that would add or grow a key are
// refused (INFO's OOM state). Safe from any goroutine; it reads one atomic.
func (s *Server) OverMemory() bool { return s.mem.OOM() }

// DefaultEventLoops is the default Config.EventLoops for procs CPUs
// (GOMAXPROCS, which follows the affinity mask and a container's CPU
// quota): one loop per CPU from 4 CPUs on, one loop per two below that,
// at least one. Measured: with 4 and 8 dedicated CPUs one loop per CPU
// doubled pipelined throughput over one per two; with 2 CPUs shared with
// the clients a second loop cost a quarter of it, so a small machine
// keeps a CPU for the keyspace, the runtime and its neighbours
// (docs/performance.md, "Event loops against CPUs").
func DefaultEventLoops() int { return eventLoopsFor(runtime.GOMAXPROCS(0)) }

func eventLoopsFor(procs int) int {
	if procs >= 4 {
		return procs
	}
	return max(1, procs/2)
}

// Validate reports whether c is usable by NewServer. The ranges of
// settings are the settings table's, worded by it.
func (c *Config) Validate() error {
	for _, r := range []struct {
		name string
		n    int64
	}{{"maxclients", int64(c.MaxClients)}, {"proto-max-bulk-len", int64(c.MaxBulkLen)}, {"client-query-buffer-limit", int64(c.QueryBufferLimit)},
		{"slowlog-max-len", int64(c.SlowlogMaxLen)}, {"maxmemory", c.MaxMemory}, {"metrics-class-limit", int64(c.MetricsClassLimit)},
		{"transaction-max-commands", int64(c.TxMaxCommands)}, {"transaction-max-bytes", c.TxMaxBytes},
		{"max-wait", int64(c.MaxWait)}, {"max-waiting", c.MaxWaiting}} {
		if err := setting.Must(r.name).CheckRange(r.n); err != nil {
			return fmt.Errorf("resp: %w", err)
		}
	}
	switch {
	case c.Timeout < 0:
		return fmt.Errorf("resp: timeout %v must not be negative", c.Timeout)
	case c.QueryTimeout < 0:
		return fmt.Errorf("resp: client-query-timeout %v must not be negative", c.QueryTimeout)
	case c.MaxArgs < 1:
		return fmt.Errorf("resp: max args %d must be at least 1", c.MaxArgs)
	case c.MemoryPolicy != maxmemory.NoEviction && c.MemoryPolicy != maxmemory.VolatileTTL:
		return fmt.Errorf("resp: unknown maxmemory policy %d", c.MemoryPolicy)
	case c.MemoryCheckInterval <= 0:
		return fmt.Errorf("resp: memory check interval %v must be positive", c.MemoryCheckInterval)
	}
	if _, err := clientmem.ParseLimit(c.MaxMemoryClients.String()); err != nil {
		return fmt.Errorf("resp: maxmemory-clients %s: %w", c.MaxMemoryClients, err)
	}
	if _, err := outlimit.Parse(c.OutputLimits.String(), c.OutputLimits); err != nil {
		return fmt.Errorf("resp: client-output-buffer-limit: %w", err)
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("resp: address %q: %w", c.Addr, err)
	}
	return nil
}

// Server serves the RESP protocol over TCP. Its methods are safe for
// concurrent use. A Server serves once: after Close or Shutdown, make a new
// one.
type Server struct {
	cfg      Config
	backend  decide.Backend
	log      *slog.Logger
	now      func() int64
	table    *table
	settings *setting.Registry // CONFIG GET and SET (settings.go)
	// hot holds the heavy-hitter summaries (hotkeys.go; none while off).
	hot hotkeys.Live
	// classes are the key classes in force (classes.go).
	classes keyclass.Live

	requirePass atomic.Pointer[string]
	protected   atomic.Bool      // protected-mode
	guard       *authguard.Guard // failed AUTH delays and counters
	acllog      acllog.Log
	maxClients  atomic.Int64
	timeout     atomic.Int64       // ns
	maxBulk     atomic.Int64       // proto-max-bulk-len
	queryLimit  atomic.Int64       // client-query-buffer-limit
	txMaxCmds   atomic.Int64       // transaction-max-commands
	txMaxBytes  atomic.Int64       // transaction-max-bytes
	waits       waiting            // WAIT: max-wait, max-waiting, the waiting requests (wait.go)
	line        *lineWaiters       // CC.ACQUIRE … WAIT: the connections waiting in lines (ccwait.go)
	queryTime   atomic.Int64       // ns
	mem         *maxmemory.Monitor // maxmemory, maxmemory-policy (memory.go)
	mover       *cluster.Mover     // MIGRATE and ABORTMOVE one at a time across the group (cmd_migrate.go)
	raft        *replication.Node  // the RAFT.* commands' node (RegisterCluster); nil otherwise
	gate        *region.Gate       // REGION.* commands' gate (RegisterRegions); nil otherwise
	outLimits   atomic.Pointer[outlimit.Limits]
	cmem        *clientmem.Pool // maxmemory-clients (clientmem.go)
	slowlog     slowlog.Log
	latency     *latency.Striped

	started  int64 // Unix ns
	nextID   atomic.Int64
	clients  atomic.Int64
	stats    serverstats.ServerCounters
	shutdown chan struct{} // closed by the SHUTDOWN command
	shutOnce sync.Once
	stopping chan struct{} // closed when Shutdown or Close begins
	stopOnce sync.Once

	ctx    context.Context // canceled by Close: aborts backend waits
	cancel context.CancelFunc

	mu       sync.Mutex
	ln       net.Listener
	conns    map[*Conn]struct{}
	closed   bool
	draining atomic.Bool
	wg       sync.WaitGroup // one per connection (goroutine or loop)
	loops    *loops         // nil: no event loops
	bg       sync.WaitGroup // the maxmemory, client eviction and sweeper loops
	served   chan struct{}  // closed when Serve's accept loop returns
}

// NewServer returns a server for cfg executing commands on backend. It does
// not listen yet: call ListenAndServe or Serve.
func NewServer(cfg Config, backend decide.Backend) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if backend == nil {
		return nil, errors.New("resp: nil backend")
	}
	s := &Server{
		cfg:      cfg,
		backend:  backend,
		mover:    newMover(cfg.Cluster),
		log:      cfg.Logger,
		now:      cfg.Now,
		table:    newTable(),
		conns:    make(map[*Conn]struct{}),
		shutdown: make(chan struct{}),
		stopping: make(chan struct{}),
		served:   make(chan struct{}),
		guard:    authguard.New(),
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = func() int64 { return time.Now().UnixNano() }
	}
	s.started = s.now()
	s.requirePass.Store(&cfg.RequirePass)
	s.protected.Store(cfg.ProtectedMode)
	s.maxClients.Store(int64(cfg.MaxClients))
	s.timeout.Store(int64(cfg.Timeout))
	s.maxBulk.Store(int64(cfg.MaxBulkLen))
	s.queryLimit.Store(int64(cfg.QueryBufferLimit))
	s.txMaxCmds.Store(int64(cfg.TxMaxCommands))
	s.txMaxBytes.Store(cfg.TxMaxBytes)
	s.waits.init(cfg)
	s.line = waiters.New[*Conn]()
	s.queryTime.Store(int64(cfg.QueryTimeout))
	s.mem = maxmemory.NewMonitor(cfg.MaxMemory, cfg.MemoryPolicy)
	s.cmem = clientmem.NewPool(cfg.MaxMemoryClients, cfg.MaxMemory)
	s.hot.Reset(cfg.HotkeysCapacity)
	if s.cfg.Policy == nil {
		s.cfg.Policy = new(limitpolicy.Policy)
	}
	if s.cfg.Violations == nil {
		s.cfg.Violations = violations.New(s.log, cfg.Addr)
	}
	outLimits := cfg.OutputLimits
	s.outLimits.Store(&outLimits)
	s.slowlog.SetSlowerThan(cfg.SlowlogSlowerThan)
	s.slowlog.SetMaxLen(int64(cfg.SlowlogMaxLen))
	s.classes.Update(func(c *keyclass.Config) {
		*c = keyclass.Config{Rules: cfg.MetricsClasses, Limit: cfg.MetricsClassLimit}
	})
	s.ctx, s.cancel = context.WithCancel(context.Background())
	for _, cmd := range commands(registerBuiltin) {
		s.table.add(cmd)
	}
	if err := s.initSettings(); err != nil {
		return nil, err
	}
	return s, nil
}

// ShutdownRequested is closed when a client sent SHUTDOWN (after the final
// save, if any). The owner of the server then calls Shutdown or Close.
func (s *Server) ShutdownRequested() <-chan struct{} { return s.shutdown }

// Addr returns the address the server listens on, or nil before it listens.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// ListenAndServe listens on the configured address and serves until Close
// or Shutdown, then returns ErrServerClosed.
func (s *Server) ListenAndServe() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("resp: listen: %w", err)
	}
	return s.Serve(ln)
}

// Serve accepts connections on ln until Close or Shutdown, then returns
// ErrServerClosed. It takes ownership of ln. It may be called once.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed || s.ln != nil {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	if s.cfg.EventLoops > 0 && s.cfg.Cluster == nil {
		l, err := startLoops(s, s.cfg.EventLoops)
		if err != nil {
			s.mu.Unlock()
			ln.Close()
			return err
		}
		s.loops = l
	}
	s.ln = ln
	s.prepare()
	s.mu.Unlock()
	defer close(s.served)
	s.log.Info("ready to accept connections", "addr", ln.Addr().String())

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.isClosed() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				// Out of file descriptors or a transient failure: back off
				// rather than spin, as net/http does.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", "err", err, "in", backoff)
				select {
				case <-time.After(backoff):
				case <-s.ctx.Done():
				}
				continue
			}
			return fmt.Errorf("resp: accept: %w", err)
		}
		backoff = 0
		s.startConn(nc)
	}
}

// prepare seals the command table, sizes the statistics and starts the
// maxmemory loop. The caller holds mu.
func (s *Server) prepare() {
	s.table.sealed.Store(true)
	s.stats.Closed = make([]serverstats.Counters, len(s.table.all))
	s.latency = latency.New(len(s.table.all))
	s.bg.Add(1)
	go s.memoryLoop()
	s.bg.Add(1)
	go s.evictLoop()
	if s.loops != nil {
		s.bg.Add(2)
		go s.sweepLoopConns()
		go s.waits.run(s)
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// startConn admits nc (or refuses it beyond maxclients) and starts its
// goroutine, which moves it onto an event loop when it may (serve).
func (s *Server) startConn(nc net.Conn) {
	s.stats.Connections.Add(1)
	if s.clients.Add(1) > s.maxClients.Load() {
		s.clients.Add(-1)
		s.stats.RejectedConns.Add(1)
		_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = nc.Write(appendErrorReply(nil, ErrMaxClients))
		nc.Close()
		return
	}
	c := newConn(s, nc)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.clients.Add(-1)
		nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	// A client that may run on a loop from the start goes there without a
	// goroutine of its own (one per connect otherwise, for nothing); one
	// that must authenticate, or that protected mode refuses, starts on
	// its goroutine (failed AUTH waits and the refusal's write may take
	// time, which no loop may spend) and moves once authenticated.
	if loopable(c) && !refusesUnprotected(s, nc) {
		if err := s.loops.enroll(c, nc); err != nil {
			// nc is closed; nothing was read from it.
			s.log.Warn("cannot serve client on an event loop; connection closed", "client", c.addr, "err", err)
			s.removeConn(c)
		}
		return
	}
	go c.serve()
}

// removeConn lets go of a closed connection (release), takes it out of
// the server's set, counts and statistics, and marks it done (wg). Its
// goroutine or loop, once, after its last command.
func (s *Server) removeConn(c *Conn) {
	release(c)
	// Its memory leaves the total as it leaves the set, under one lock:
	// an eviction pass between the two would count memory no connection
	// holds and close another client for it.
	s.mu.Lock()
	delete(s.conns, c)
	c.cmem.Untrack(s.cmem)
	s.mu.Unlock()
	s.clients.Add(-1)
	s.stats.Absorb(c.acct.stats)
	s.wg.Done()
}

// Shutdown stops the server gracefully: it stops accepting, lets every
// connection finish the commands it has received and flush their replies,
// then closes it. If ctx ends first, the remaining connections are closed
// at once (as by Close) and ctx's error is returned. Every goroutine of the
// server has exited when Shutdown returns.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	ln := s.ln
	s.mu.Unlock()
	s.draining.Store(true)
	s.stopOnce.Do(func() { close(s.stopping) })
	if ln != nil {
		ln.Close()
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	// Wake connections blocked in a read; repeat, because a connection
	// between batches may set its own deadline after a poke.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		s.pokeConns()
		select {
		case <-done:
			s.finish(ln)
			return nil
		case <-ctx.Done():
			s.Close()
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Close stops the server at once: it closes the listener and every
// connection, and returns after every goroutine of the server has exited.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	ln := s.ln
	conns := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	s.draining.Store(true)
	s.stopOnce.Do(func() { close(s.stopping) })
	s.cancel()
	if ln != nil {
		ln.Close()
	}
	for _, c := range conns {
		c.closeNow()
	}
	s.wg.Wait()
	s.finish(ln)
	return nil
}

func (s *Server) finish(ln net.Listener) {
	if ln != nil {
		<-s.served
	}
	if s.loops != nil {
		s.loops.stop()
	}
	s.cancel()
	s.bg.Wait()
}

func (s *Server) pokeConns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	past := time.Unix(1, 0)
	for c := range s.conns {
		if lc := c.lp.loop.Load(); lc != nil {
			// Between events a loop connection has nothing in flight:
			// its loop closes it after the event it may be running.
			_ = lc.gc.Close()
			continue
		}
		_ = c.nc.SetReadDeadline(past)
	}
}

// requestShutdown is SHUTDOWN's signal to the owner.
func (s *Server) requestShutdown() {
	s.shutOnce.Do(func() { close(s.shutdown) })
}

func (s *Server) uptime() int64 { return (s.now() - s.started) / 1e9 }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
