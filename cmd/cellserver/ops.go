package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cellserver/cellserver/internal/clientmem"
	"github.com/cellserver/cellserver/internal/keyclass"
	"github.com/cellserver/cellserver/internal/limitpolicy"
	"github.com/cellserver/cellserver/internal/maxmemory"
	"github.com/cellserver/cellserver/internal/outlimit"
	"github.com/cellserver/cellserver/internal/violations"
	"github.com/cellserver/cellserver/replication"
	"github.com/cellserver/cellserver/resp"
)

// opsConfig holds the operational directives: TLS, protected mode, limits
// against abuse, the slow log, maxmemory and the metrics listener.
type opsConfig struct {
	ProtectedMode bool
	MetricsAddr   string

	TLSPort         int
	TLSCertFile     string
	TLSKeyFile      string
	TLSCACertFile   string
	TLSAuthClients  string // yes, no, optional
	ProtoMaxBulkLen int64
	QueryBufLimit   int64
	QueryTimeout    int           // seconds; 0: none
	OutputLimit     string        // client-output-buffer-limit
	TxMaxCommands   int           // transaction-max-commands
	TxMaxBytes      int64         // transaction-max-bytes
	MaxWait         time.Duration // max-wait
	MaxWaiting      int64         // max-waiting

	SlowlogSlowerThan int64 // µs
	SlowlogMaxLen     int
	MaxMemory         int64
	MaxMemoryPolicy   string
	MaxMemoryClients  string // maxmemory-clients
	HotkeysCapacity   int
	MetricsClasses    keyclass.Rules // metrics-class
	MetricsClassLimit int
	LimitOverride     string // limit-override rules
	LimitShadow       string // limit-shadow patterns
	ViolationsLog     bool
	ViolationsLogRate int

	// policy holds the limit-override and limit-shadow rules in force
	// once made (limitPolicy): the RESP server applies them, and in a
	// cluster the log's setting entries change them.
	policy *limitpolicy.Policy

	// certs serves tls-port's certificates once started (startTLS); nil
	// before, and without tls-port.
	certs *certReloader
}

func defaultOpsConfig() opsConfig {
	rc := resp.DefaultConfig()
	return opsConfig{
		ProtectedMode:     true,
		TLSAuthClients:    "yes",
		ProtoMaxBulkLen:   int64(rc.MaxBulkLen),
		QueryBufLimit:     int64(rc.QueryBufferLimit),
		QueryTimeout:      int(rc.QueryTimeout / time.Second),
		OutputLimit:       "normal 64mb 16mb 60",
		TxMaxCommands:     rc.TxMaxCommands,
		TxMaxBytes:        rc.TxMaxBytes,
		MaxWait:           rc.MaxWait,
		MaxWaiting:        rc.MaxWaiting,
		SlowlogSlowerThan: rc.SlowlogSlowerThan,
		SlowlogMaxLen:     rc.SlowlogMaxLen,
		MaxMemoryPolicy:   rc.MemoryPolicy.String(),
		MaxMemoryClients:  rc.MaxMemoryClients.String(),
		HotkeysCapacity:   rc.HotkeysCapacity,
		MetricsClassLimit: rc.MetricsClassLimit,
		ViolationsLogRate: violations.DefaultRate,
	}
}

// opsDirectives are the operational settings of the directive table.
var opsDirectives = []directive{
	{name: "protected-mode", field: func(c *Config) any { return &c.Ops.ProtectedMode }},
	{name: "metrics-addr", field: func(c *Config) any { return &c.Ops.MetricsAddr }},
	{name: "tls-port", field: func(c *Config) any { return &c.Ops.TLSPort }},
	{name: "tls-cert-file", field: func(c *Config) any { return &c.Ops.TLSCertFile }},
	{name: "tls-key-file", field: func(c *Config) any { return &c.Ops.TLSKeyFile }},
	{name: "tls-ca-cert-file", field: func(c *Config) any { return &c.Ops.TLSCACertFile }},
	{name: "tls-auth-clients", field: func(c *Config) any { return &c.Ops.TLSAuthClients }},
	{name: "proto-max-bulk-len", field: func(c *Config) any { return &c.Ops.ProtoMaxBulkLen }},
	{name: "client-query-buffer-limit", field: func(c *Config) any { return &c.Ops.QueryBufLimit }},
	{name: "client-query-timeout", field: func(c *Config) any { return &c.Ops.QueryTimeout }},
	{name: "client-output-buffer-limit", field: func(c *Config) any { return &c.Ops.OutputLimit }},
	{name: "transaction-max-commands", field: func(c *Config) any { return &c.Ops.TxMaxCommands }},
	{name: "transaction-max-bytes", field: func(c *Config) any { return &c.Ops.TxMaxBytes }},
	{name: "max-wait", field: func(c *Config) any { return &c.Ops.MaxWait }},
	{name: "max-waiting", field: func(c *Config) any { return &c.Ops.MaxWaiting }},
	{name: "slowlog-log-slower-than", field: func(c *Config) any { return &c.Ops.SlowlogSlowerThan }},
	{name: "slowlog-max-len", field: func(c *Config) any { return &c.Ops.SlowlogMaxLen }},
	{name: "maxmemory", field: func(c *Config) any { return &c.Ops.MaxMemory }},
	{name: "maxmemory-policy", field: func(c *Config) any { return &c.Ops.MaxMemoryPolicy }},
	{name: "maxmemory-clients", field: func(c *Config) any { return &c.Ops.MaxMemoryClients }},
	{name: "hotkeys-capacity", field: func(c *Config) any { return &c.Ops.HotkeysCapacity }},
	{name: "metrics-class", field: func(c *Config) any { return &c.Ops.MetricsClasses }},
	{name: "metrics-class-limit", field: func(c *Config) any { return &c.Ops.MetricsClassLimit }},
	{name: "limit-override", field: func(c *Config) any { return &c.Ops.LimitOverride }},
	{name: "limit-shadow", field: func(c *Config) any { return &c.Ops.LimitShadow }},
	{name: "violations-log", field: func(c *Config) any { return &c.Ops.ViolationsLog }},
	{name: "violations-log-rate", field: func(c *Config) any { return &c.Ops.ViolationsLogRate }},
}

// validateOps checks the operational directives against each other
// (ranges: Validate). Protected mode does not stop the server from
// starting: it refuses clients of other hosts per connection (see
// protectedModeWarning).
func (c *Config) validateOps() error {
	o := &c.Ops
	var errs []error
	if c.Port == 0 && c.Cluster.enabled() {
		errs = append(errs, errors.New("cluster mode needs the plaintext port: nodes send RAFT.HELLO and RAFT.JOIN, with the password, to one another's port, so a cluster cannot run TLS-only (port must not be 0)"))
	}
	if c.Port == 0 && o.TLSPort == 0 {
		errs = append(errs, errors.New("port 0 turns the plaintext port off: set tls-port, or a port"))
	}
	if o.TLSPort != 0 {
		if o.TLSCertFile == "" || o.TLSKeyFile == "" {
			errs = append(errs, errors.New("tls-port needs tls-cert-file and tls-key-file"))
		}
		if o.TLSPort == c.Port {
			errs = append(errs, fmt.Errorf("tls-port and port are both %d", c.Port))
		}
	}
	switch o.TLSAuthClients {
	case "yes", "optional":
		if o.TLSPort != 0 && o.TLSCACertFile == "" {
			errs = append(errs, fmt.Errorf("tls-auth-clients %s needs tls-ca-cert-file (or tls-auth-clients no)", o.TLSAuthClients))
		}
	}
	if _, err := limitpolicy.ParseOverrides(o.LimitOverride); err != nil {
		errs = append(errs, fmt.Errorf("limit-override %q: %w", o.LimitOverride, err))
	}
	if _, err := limitpolicy.ParseShadow(o.LimitShadow); err != nil {
		errs = append(errs, fmt.Errorf("limit-shadow %q: %w", o.LimitShadow, err))
	}
	if _, err := outlimit.Parse(o.OutputLimit, outlimit.Default()); err != nil {
		errs = append(errs, fmt.Errorf("client-output-buffer-limit %q: %w", o.OutputLimit, err))
	}
	if _, err := clientmem.ParseLimit(o.MaxMemoryClients); err != nil {
		errs = append(errs, fmt.Errorf("maxmemory-clients %q: %w", o.MaxMemoryClients, err))
	}
	if o.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(o.MetricsAddr); err != nil {
			errs = append(errs, fmt.Errorf("metrics-addr %q: %w", o.MetricsAddr, err))
		}
	}
	return errors.Join(errs...)
}

// protectedModeWarning is the start-up warning of a server that listens
// beyond this host without a password while protected mode is on (clients
// of other hosts will be refused), or "".
func (c *Config) protectedModeWarning() string {
	if !c.Ops.ProtectedMode || c.RequirePass != "" || isLoopback(c.Bind) {
		return ""
	}
	return "protected mode is on and no password is set: clients of other hosts will be refused with a DENIED error; " +
		"set requirepass, or protected-mode no if the network is otherwise protected"
}

// isLoopback reports whether a bind address reaches this host only.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return ip != nil && ip.IsLoopback()
}

// applyOps maps the operational directives onto the RESP server's
// configuration and adds their read-only CONFIG GET entries.
func (c *Config) applyOps(rc *resp.Config) {
	o := &c.Ops
	rc.MaxBulkLen = int(o.ProtoMaxBulkLen)
	rc.QueryBufferLimit = int(o.QueryBufLimit)
	rc.QueryTimeout = time.Duration(o.QueryTimeout) * time.Second
	rc.TxMaxCommands = o.TxMaxCommands
	rc.TxMaxBytes = o.TxMaxBytes
	rc.MaxWait = o.MaxWait
	rc.MaxWaiting = o.MaxWaiting
	rc.OutputLimits, _ = outlimit.Parse(o.OutputLimit, outlimit.Default()) // checked by validateOps
	rc.SlowlogSlowerThan = o.SlowlogSlowerThan
	rc.SlowlogMaxLen = o.SlowlogMaxLen
	rc.MaxMemory = o.MaxMemory
	rc.MemoryPolicy, _ = maxmemory.ParsePolicy(o.MaxMemoryPolicy)
	rc.MaxMemoryClients, _ = clientmem.ParseLimit(o.MaxMemoryClients) // checked by validateOps
	rc.ProtectedMode = o.ProtectedMode
	rc.HotkeysCapacity = o.HotkeysCapacity
	rc.MetricsClasses = o.MetricsClasses
	rc.MetricsClassLimit = o.MetricsClassLimit
	rc.Policy = o.limitPolicy()
	node := c.Cluster.NodeID
	if node == "" {
		node = c.Addr()
	}
	rc.Violations = violations.New(rc.Logger, node)
	rc.Violations.SetEnabled(o.ViolationsLog)
	rc.Violations.SetRate(int64(o.ViolationsLogRate))
}

// limitPolicy returns the node's limit-override and limit-shadow rules,
// made from the configured values on first use (checked by validateOps).
func (o *opsConfig) limitPolicy() *limitpolicy.Policy {
	if o.policy == nil {
		o.policy = new(limitpolicy.Policy)
		rules, _ := limitpolicy.ParseOverrides(o.LimitOverride)
		o.policy.SetOverrides(rules)
		shadow, _ := limitpolicy.ParseShadow(o.LimitShadow)
		o.policy.SetShadow(shadow)
	}
	return o.policy
}

// applySetting is the cluster's replication.Config.OnSetting: a setting
// entry of the group's log takes effect on this node. The leader checked
// the value; one that does not parse (from a newer version) is logged and
// changes nothing.
func (o *opsConfig) applySetting(logger *slog.Logger) func(name, value string) {
	p := o.limitPolicy()
	return func(name, value string) {
		var err error
		switch name {
		case "limit-override":
			var rules []limitpolicy.Override
			if rules, err = limitpolicy.ParseOverrides(value); err == nil {
				p.SetOverrides(rules)
			}
		case "limit-shadow":
			var patterns []string
			if patterns, err = limitpolicy.ParseShadow(value); err == nil {
				p.SetShadow(patterns)
			}
		default:
			err = errors.New("unknown replicated setting")
		}
		if err != nil {
			logger.Warn("replicated setting not applied", "setting", name, "value", value, "err", err)
			return
		}
		logger.Info("replicated setting applied", "setting", name, "value", value)
	}
}

// replicateSetting is resp.Config.ReplicateSetting in a cluster: the
// leader commits the setting to the group's log; a follower refuses,
// naming the leader.
func replicateSetting(node *replication.Node, timeout time.Duration) func(name, value string) error {
	return func(name, value string) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		err := node.SetSetting(ctx, name, value)
		if errors.Is(err, replication.ErrNotLeader) {
			if addr, ok := node.LeaderResp(); ok {
				return fmt.Errorf("%s is replicated to the whole group: set it on the leader, %s", name, addr)
			}
			return fmt.Errorf("%s is replicated to the whole group: set it on the leader (none known now)", name)
		}
		return err
	}
}

// loadTLSFiles loads tls-cert-file and tls-key-file, and the CA
// certificates of tls-ca-cert-file (nil pool when it is not set). The RESP
// TLS port, the rate-limit service and the cluster's raft port share them.
func (o *opsConfig) loadTLSFiles() (tls.Certificate, *x509.CertPool, error) {
	return loadTLSFiles(tlsFiles{Cert: o.TLSCertFile, Key: o.TLSKeyFile, CA: o.TLSCACertFile})
}

func loadTLSFiles(f tlsFiles) (tls.Certificate, *x509.CertPool, error) {
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return cert, nil, fmt.Errorf("tls: load certificate %s and key %s: %w", f.Cert, f.Key, err)
	}
	if f.CA == "" {
		return cert, nil, nil
	}
	pem, err := os.ReadFile(f.CA)
	if err != nil {
		return cert, nil, fmt.Errorf("tls: read CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return cert, nil, fmt.Errorf("tls: no PEM certificate in %s", f.CA)
	}
	return cert, pool, nil
}

// tlsConfig is the TLS configuration of the client ports (tls-port, and
// rls-port with it): the certificate reloader's once the server started
// one (startTLS), else the files read now.
func (o *opsConfig) tlsConfig() (*tls.Config, error) {
	if o.certs != nil {
		return o.certs.serverConfig(), nil
	}
	return buildTLSConfig(tlsFiles{Cert: o.TLSCertFile, Key: o.TLSKeyFile, CA: o.TLSCACertFile}, o.TLSAuthClients)
}

// tlsHandshakeTimeout bounds a TLS handshake, so that a client that
// connects and stays silent cannot hold a connection forever.
const tlsHandshakeTimeout = 10 * time.Second

// listen opens the plaintext and TLS listeners the configuration asks for
// and returns them as one listener.
func (c *Config) listen() (*multiListener, error) {
	var lns []net.Listener
	closeAll := func() {
		for _, l := range lns {
			l.Close()
		}
	}
	if c.Port != 0 {
		ln, err := net.Listen("tcp", c.Addr())
		if err != nil {
			return nil, fmt.Errorf("listen: %w", err)
		}
		lns = append(lns, ln)
	}
	if c.Ops.TLSPort != 0 {
		tc, err := c.Ops.tlsConfig()
		if err != nil {
			closeAll()
			return nil, err
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(c.Bind, strconv.Itoa(c.Ops.TLSPort)))
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("listen tls: %w", err)
		}
		tl := &tlsListener{Listener: ln, config: tc}
		if c.Ops.certs != nil {
			tl.failed = c.Ops.certs.handshakeFailed
		}
		lns = append(lns, tl)
	}
	return newMultiListener(lns), nil
}

// tlsListener wraps accepted connections in TLS; the handshake happens on
// the connection's first read or write, in its own goroutine. failed, when
// set, hears of each handshake that fails.
type tlsListener struct {
	net.Listener
	config *tls.Config
	failed func(err error, remote net.Addr)
}

func (l *tlsListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &tlsConn{Conn: tls.Server(nc, l.config), failed: l.failed}, nil
}

// tlsConn completes the handshake within tlsHandshakeTimeout before the
// first read or write, then restores the read deadline the server set.
type tlsConn struct {
	*tls.Conn
	failed func(err error, remote net.Addr)

	mu       sync.Mutex
	deadline time.Time // the read deadline last set
	hs       sync.Once
	hsErr    error
}

func (c *tlsConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

func (c *tlsConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *tlsConn) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *tlsConn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// handshake runs the handshake once, whichever of Read and Write comes
// first, and reports a failure to failed.
func (c *tlsConn) handshake() error {
	c.hs.Do(func() {
		hs := time.Now().Add(tlsHandshakeTimeout)
		c.mu.Lock()
		if d := c.deadline; !d.IsZero() && d.Before(hs) {
			hs = d
		}
		c.mu.Unlock()
		_ = c.Conn.SetDeadline(hs)
		if c.hsErr = c.Conn.Handshake(); c.hsErr != nil {
			if c.failed != nil {
				c.failed(c.hsErr, c.Conn.RemoteAddr())
			}
			return
		}
		_ = c.Conn.SetWriteDeadline(time.Time{})
		c.mu.Lock()
		_ = c.Conn.SetReadDeadline(c.deadline)
		c.mu.Unlock()
	})
	return c.hsErr
}

// multiListener accepts from several listeners as one. Addr is the first
// listener's address (the plaintext port when it is on).
type multiListener struct {
	lns    []net.Listener
	conns  chan net.Conn
	errs   chan error
	done   chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
	closed error
}

func newMultiListener(lns []net.Listener) *multiListener {
	m := &multiListener{lns: lns, conns: make(chan net.Conn), errs: make(chan error, len(lns)), done: make(chan struct{})}
	for _, ln := range lns {
		m.wg.Add(1)
		go m.accept(ln)
	}
	return m
}

func (m *multiListener) accept(ln net.Listener) {
	defer m.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				// Transient (out of descriptors): hand it on so that the
				// server backs off, and keep accepting.
				select {
				case m.errs <- err:
				case <-m.done:
					return
				}
				continue
			}
			select {
			case m.errs <- err:
			case <-m.done:
			}
			return
		}
		select {
		case m.conns <- nc:
		case <-m.done:
			nc.Close()
			return
		}
	}
}

// Accept returns the next connection from any listener.
func (m *multiListener) Accept() (net.Conn, error) {
	select {
	case nc := <-m.conns:
		return nc, nil
	case err := <-m.errs:
		return nil, err
	case <-m.done:
		return nil, net.ErrClosed
	}
}

// Close closes every listener and waits for their accept loops.
func (m *multiListener) Close() error {
	m.once.Do(func() {
		close(m.done)
		var errs []error
		for _, ln := range m.lns {
			errs = append(errs, ln.Close())
		}
		m.wg.Wait()
		m.closed = errors.Join(errs...)
	})
	return m.closed
}

// Addr returns the first listener's address.
func (m *multiListener) Addr() net.Addr { return m.lns[0].Addr() }

// logAttrs names the addresses really listened on, for the start-up log:
// addr for the plaintext port, tls_addr for the TLS port (absent when off).
func (m *multiListener) logAttrs() []any {
	var attrs []any
	for _, ln := range m.lns {
		key := "addr"
		if _, ok := ln.(*tlsListener); ok {
			key = "tls_addr"
		}
		attrs = append(attrs, key, ln.Addr().String())
	}
	return attrs
}
