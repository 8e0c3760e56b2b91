package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cellserver/cellserver/resp"
)

// tlsFiles are the PEM files TLS is served with.
type tlsFiles struct {
	Cert, Key, CA string
}

// certReloader serves TLS with certificates it can replace while the
// server runs: on SIGHUP (the same files read again) and on CONFIG SET
// tls-cert-file, tls-key-file or tls-ca-cert-file; the raft port's mutual
// TLS takes the same files (onLoad). Handshakes take the
// configuration in force from an atomic pointer (GetConfigForClient), so a
// reload costs a new handshake nothing and open connections keep the
// session they have. It also counts and logs failed handshakes. Its
// methods are safe for concurrent use.
type certReloader struct {
	auth string // tls-auth-clients: yes, no or optional
	cur  atomic.Pointer[tls.Config]

	mu      sync.Mutex // serialises loads; guards files and pending
	files   tlsFiles   // those cur was loaded from
	pending tlsFiles   // CONFIG SET's values, applied by apply

	// onLoad hear of every certificate and CA loaded after the first (the
	// raft port's mutual TLS and the links to peer regions take them:
	// addOnLoad).
	onLoad []func(tls.Certificate, *x509.CertPool) error

	failures atomic.Int64
	failLog  *rateLog
	log      *slog.Logger
}

// addOnLoad makes f hear of every reload from now on.
func (r *certReloader) addOnLoad(f func(tls.Certificate, *x509.CertPool) error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onLoad = append(r.onLoad, f)
}

// load builds the configuration of files and hands their certificate and
// CA to onLoad; on an error nothing changes. The caller holds r.mu.
func (r *certReloader) load(files tlsFiles) error {
	cert, pool, err := loadTLSFiles(files)
	if err != nil {
		return err
	}
	for _, f := range r.onLoad {
		if err := f(cert, pool); err != nil {
			return err
		}
	}
	r.cur.Store(serverTLS(cert, pool, r.auth))
	return nil
}

// newCertReloader loads o's files; an error names the file at fault.
func newCertReloader(o *opsConfig, logger *slog.Logger) (*certReloader, error) {
	r := &certReloader{
		auth:    o.TLSAuthClients,
		files:   tlsFiles{Cert: o.TLSCertFile, Key: o.TLSKeyFile, CA: o.TLSCACertFile},
		log:     logger,
		failLog: newRateLog(time.Second, func() time.Time { return time.Now() }),
	}
	r.pending = r.files
	tc, err := buildTLSConfig(r.files, r.auth)
	if err != nil {
		return nil, err
	}
	r.cur.Store(tc)
	return r, nil
}

// buildTLSConfig loads files into a server configuration: TLS 1.2 or
// later, the certificate and key, and client certificate checks per auth
// (tls-auth-clients).
func buildTLSConfig(f tlsFiles, auth string) (*tls.Config, error) {
	cert, pool, err := loadTLSFiles(f)
	if err != nil {
		return nil, err
	}
	return serverTLS(cert, pool, auth), nil
}

// serverTLS is the server configuration of a certificate and a CA.
func serverTLS(cert tls.Certificate, pool *x509.CertPool, auth string) *tls.Config {
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, MinVersion: tls.VersionTLS12}
	switch auth {
	case "yes":
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	case "optional":
		tc.ClientAuth = tls.VerifyClientCertIfGiven
	default:
		tc.ClientAuth = tls.NoClientCert
	}
	return tc
}

// serverConfig is the configuration listeners use: every handshake gets
// the one in force at its start.
func (r *certReloader) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.cur.Load(), nil
		},
	}
}

// reload reads the files in force again (SIGHUP) and returns them. On an
// error the configuration in force stays.
func (r *certReloader) reload() (tlsFiles, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.files, r.load(r.files)
}

// apply loads the files CONFIG SET recorded; on an error nothing changes
// (CONFIG SET then puts the recorded names back).
func (r *certReloader) apply() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.load(r.pending); err != nil {
		r.pending = r.files
		return err
	}
	r.files = r.pending
	r.log.Info("TLS certificates loaded", "cert", r.files.Cert, "key", r.files.Key, "ca", r.files.CA)
	return nil
}

// settings are CONFIG GET/SET's tls-cert-file, tls-key-file and
// tls-ca-cert-file: set together, applied once (resp.SettingBatch).
func (r *certReloader) settings() []resp.Setting {
	batch := &resp.SettingBatch{Apply: r.apply}
	file := func(name string, f func(*tlsFiles) *string) resp.Setting {
		return resp.Setting{Name: name, Batch: batch,
			Get: func() string {
				r.mu.Lock()
				defer r.mu.Unlock()
				return *f(&r.files)
			},
			Set: func(v string) error {
				r.mu.Lock()
				defer r.mu.Unlock()
				*f(&r.pending) = v
				return nil
			}}
	}
	return []resp.Setting{
		file("tls-cert-file", func(t *tlsFiles) *string { return &t.Cert }),
		file("tls-key-file", func(t *tlsFiles) *string { return &t.Key }),
		file("tls-ca-cert-file", func(t *tlsFiles) *string { return &t.CA }),
	}
}

// handshakeFailed counts a failed handshake and logs it at notice level, at
// most one line a second (the next line says how many were not logged). A
// connection closed before sending anything (a TCP health check) is not a
// failure.
func (r *certReloader) handshakeFailed(err error, remote net.Addr) {
	if errors.Is(err, io.EOF) {
		return
	}
	r.failures.Add(1)
	if ok, suppressed := r.failLog.allow(); ok {
		r.log.Info("TLS handshake failed", "client", remote.String(), "err", err, "suppressed", suppressed)
	}
}

// watchSIGHUP reloads the certificates on each SIGHUP until the returned
// function is called (it waits for the watcher to end).
func (r *certReloader) watchSIGHUP() (stop func()) {
	hup := make(chan os.Signal, 1)
	done := make(chan struct{})
	var wg sync.WaitGroup
	signal.Notify(hup, syscall.SIGHUP)
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-hup:
				f, err := r.reload()
				if err != nil {
					r.log.Warn("SIGHUP: TLS certificates not reloaded; those in force stay", "err", err)
					continue
				}
				r.log.Info("SIGHUP: TLS certificates reloaded", "cert", f.Cert, "key", f.Key, "ca", f.CA)
			}
		}
	})
	return func() {
		signal.Stop(hup)
		close(done)
		wg.Wait()
	}
}

// rateLog allows one log line per interval and counts the lines it
// refused meanwhile. It is safe for concurrent use.
type rateLog struct {
	interval time.Duration
	now      func() time.Time

	mu         sync.Mutex
	last       time.Time
	suppressed int64
}

func newRateLog(interval time.Duration, now func() time.Time) *rateLog {
	return &rateLog{interval: interval, now: now}
}

// allow reports whether a line may be logged now and, when it may, how
// many were refused since the last one allowed.
func (l *rateLog) allow() (ok bool, suppressed int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.now()
	if !l.last.IsZero() && t.Sub(l.last) < l.interval {
		l.suppressed++
		return false, 0
	}
	l.last, suppressed, l.suppressed = t, l.suppressed, 0
	return true, suppressed
}
