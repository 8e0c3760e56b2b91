package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/reflection"

	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/internal/serverstats"
	"github.com/cellserver/cellserver/internal/setting"
	"github.com/cellserver/cellserver/resp"
	"github.com/cellserver/cellserver/rls"
)

// rlsWatchInterval is how often the rate-limit service's configuration
// directory is checked for changes.
const rlsWatchInterval = time.Second

// rlsConfig holds the directives of Envoy's rate-limit service (package
// rls): its gRPC port, its rules directory, its response headers and
// whether it answers gRPC server reflection.
type rlsConfig struct {
	Port            int    // 0..65535; 0: off
	ConfigDir       string // directory of envoyproxy/ratelimit YAML files ("": no rules)
	ResponseHeaders string // off, ietf or legacy
	Reflection      bool   // serve gRPC server reflection too
	StatsLimit      int    // rls-stats-limit: domain and descriptor pairs counted on their own

	// svc is the service, built by startRLS before the RESP server so
	// that CONFIG GET/SET reach it; nil before.
	svc *rls.Service
}

func defaultRLSConfig() rlsConfig {
	return rlsConfig{ResponseHeaders: "off", StatsLimit: rls.DefaultStatsLimit}
}

var rlsDirectives = []directive{
	{name: "rls-port", field: func(c *Config) any { return &c.RLS.Port }},
	{name: "rls-config", field: func(c *Config) any { return &c.RLS.ConfigDir }},
	{name: "rls-response-headers", field: func(c *Config) any { return &c.RLS.ResponseHeaders }},
	{name: "rls-reflection", field: func(c *Config) any { return &c.RLS.Reflection }},
	{name: "rls-stats-limit", field: func(c *Config) any { return &c.RLS.StatsLimit }},
}

// validateRLS checks that the rate-limit port does not collide with the
// RESP ports.
func (c *Config) validateRLS() error {
	p := c.RLS.Port
	switch {
	case p == 0:
		return nil
	case p == c.Port:
		return fmt.Errorf("rls-port and port are both %d", p)
	case p == c.Ops.TLSPort:
		return fmt.Errorf("rls-port and tls-port are both %d", p)
	}
	return nil
}

// rlsSettings are the CONFIG GET/SET entries of the rate-limit service:
// rls-config and rls-response-headers change live (a bad directory is
// refused and the rules in force stay); rls-port is read-only, shown from
// the settings table (tableSettings).
func (c *Config) rlsSettings() []resp.Setting {
	r := &c.RLS
	return []resp.Setting{
		{Name: "rls-config", Get: func() string {
			if r.svc == nil {
				return r.ConfigDir
			}
			return r.svc.Dir()
		}, Set: func(v string) error {
			if r.svc == nil {
				return errors.New("the rate-limit service is not running")
			}
			return r.svc.Load(v)
		}},
		{Name: "rls-response-headers", Get: func() string {
			if r.svc == nil {
				return r.ResponseHeaders
			}
			return r.svc.Headers().String()
		}, Set: func(v string) error {
			w, err := setting.Must("rls-response-headers").ParseWord(v)
			if err != nil {
				return err
			}
			m, err := rls.ParseHeaderMode(w)
			if err != nil {
				return err
			}
			if r.svc == nil {
				return errors.New("the rate-limit service is not running")
			}
			r.svc.SetHeaders(m)
			return nil
		}},
	}
}

// rlsInfo is INFO's rls section while the rate-limit service serves
// (rls-port set): its totals, then one line per domain and descriptor
// pair counted (rls.DescriptorStats).
func (c *Config) rlsInfo() []serverstats.Section {
	if c.RLS.Port == 0 || c.RLS.svc == nil {
		return nil
	}
	svc := c.RLS.svc
	return []serverstats.Section{{Name: "rls", Fields: func() []serverstats.Field {
		st := svc.Stats()
		n := func(name string, v int64) serverstats.Field {
			return serverstats.Field{Name: name, Value: strconv.FormatInt(v, 10)}
		}
		out := []serverstats.Field{
			n("rls_requests", st.Requests), n("rls_over_limit", st.OverLimit),
			n("rls_shadow_over_limit", st.ShadowOverLimit), n("rls_errors", st.Errors),
			n("rls_forwarded_descriptors", st.Forwarded), n("rls_redirected_descriptors", st.Redirected),
			n("rls_undecided_descriptors", st.Undecided),
			n("rls_config_loads", st.Reloads), n("rls_config_load_errors", st.ReloadErrors),
			n("rls_stats_limit", int64(st.StatsLimit)), n("rls_descriptors", int64(len(st.Descriptors))),
		}
		for i, d := range st.Descriptors {
			out = append(out, serverstats.Field{Name: "descriptor_" + strconv.Itoa(i), Value: "domain=" + strconv.Quote(d.Domain) +
				",descriptor=" + strconv.Quote(d.Descriptor) + ",total_hits=" + strconv.FormatInt(d.TotalHits, 10) +
				",over_limit=" + strconv.FormatInt(d.OverLimit, 10) + ",near_limit=" + strconv.FormatInt(d.NearLimit, 10) +
				",shadow_over_limit=" + strconv.FormatInt(d.ShadowOverLimit, 10)})
		}
		return out
	}}}
}

// rlsServer is the running rate-limit service: its gRPC server, its
// configuration watcher and its SIGHUP handler.
type rlsServer struct {
	gs     *grpc.Server
	served chan error
	cancel context.CancelFunc
	wg     sync.WaitGroup
	hup    chan os.Signal
	once   sync.Once
	ctx    context.Context // ends at stopRLS
	// srv is the RESP server once it runs (followMemory): its maxmemory
	// state is the service's too, and its heavy hitters count the
	// service's decisions.
	srv atomic.Pointer[resp.Server]
}

// overMemory reports whether writes that would create keys are refused
// (over maxmemory under noeviction); false until the RESP server runs.
func (s *rlsServer) overMemory() bool {
	srv := s.srv.Load()
	return srv != nil && srv.OverMemory()
}

// countDecision counts one of the service's decisions in the RESP server's
// heavy hitters (LIMITER TOP, OBJECT FREQ); nothing until that server runs.
func (s *rlsServer) countDecision(key []byte, limited bool) {
	if srv := s.srv.Load(); srv != nil {
		srv.CountDecision(key, limited)
	}
}

// followMemory gives the rate-limit service the RESP server's maxmemory
// state, so that it refuses to create keys when limiter commands do. It
// does nothing when the service does not serve.
func (st *storage) followMemory(srv *resp.Server) {
	if st.rls != nil {
		st.rls.srv.Store(srv)
	}
}

// startRLS builds the rate-limit service over st's decision path (its
// Rules — limit-override and limit-shadow rewrite each descriptor's
// request, as they do CL.THROTTLE's —, its Backend, and in a cluster its
// Groups), so its
// decisions are made (and, in a cluster, replicated) as CL.THROTTLE's are —
// in a cluster each in the group that serves its key (decide.Groups) — and
// loads rls-config: a bad directory stops the start. With rls-port
// set it serves gRPC there (with TLS when tls-port is set, sharing its
// certificate and client policy), reloads the rules when their files change
// or on SIGHUP, until stopRLS.
func (st *storage) startRLS(cfg *Config, logger *slog.Logger) error {
	mode, err := rls.ParseHeaderMode(cfg.RLS.ResponseHeaders)
	if err != nil {
		return err
	}
	s := &rlsServer{served: make(chan error, 1), hup: make(chan os.Signal, 1)}
	opt := rls.Options{Writer: st.path.Backend, Rules: st.path.Rules, Headers: mode, Logger: logger, NoGrow: s.overMemory, StatsLimit: cfg.RLS.StatsLimit,
		Decided: s.countDecision}
	if st.path.Groups != nil {
		opt.Router = st.path.Groups
	}
	svc := rls.New(opt)
	if err := svc.Load(cfg.RLS.ConfigDir); err != nil {
		return fmt.Errorf("rls-config: %w", err)
	}
	cfg.RLS.svc = svc
	if cfg.RLS.Port == 0 {
		return nil
	}
	var opts []grpc.ServerOption
	if cfg.Ops.TLSPort != 0 {
		tc, err := cfg.Ops.tlsConfig()
		if err != nil {
			return err
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(tc)), grpc.ConnectionTimeout(tlsHandshakeTimeout))
	}
	addr := net.JoinHostPort(cfg.Bind, strconv.Itoa(cfg.RLS.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen rls: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.gs, s.ctx, s.cancel = rls.NewGRPCServer(svc, opts...), ctx, cancel
	if cfg.RLS.Reflection {
		reflection.Register(s.gs)
	}
	go func() { s.served <- s.gs.Serve(ln) }()
	s.wg.Go(func() { svc.Watch(ctx, rlsWatchInterval) })
	signal.Notify(s.hup, syscall.SIGHUP)
	s.wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.hup:
				logger.Info("SIGHUP: reloading the rate-limit service's configuration")
				_ = svc.Reload() // logged by the service
			}
		}
	})
	st.rls = s
	logger.Info("rate-limit service listening", "addr", ln.Addr().String(), "tls", cfg.Ops.TLSPort != 0, "config", cfg.RLS.ConfigDir, "reflection", cfg.RLS.Reflection)
	return nil
}

// stopRLS stops the rate-limit service, if it runs: no new calls, the calls
// in flight finish (within shutdownGrace), the watcher and the SIGHUP
// handler end. Calling it again does nothing.
func (st *storage) stopRLS(logger *slog.Logger) {
	s := st.rls
	if s == nil {
		return
	}
	s.once.Do(func() {
		signal.Stop(s.hup)
		s.cancel()
		s.wg.Wait()
		stopped := make(chan struct{})
		go func() {
			s.gs.GracefulStop()
			close(stopped)
		}()
		select {
		case <-stopped:
		case <-time.After(shutdownGrace):
			logger.Warn("rate-limit service: shutdown grace expired; calls in flight cut")
			s.gs.Stop()
			<-stopped
		}
		if err := <-s.served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			logger.Warn("rate-limit service stopped", "err", err)
		}
	})
}

// The rate-limit service applies the decision path's rules and routes
// across a cluster's groups through its routing stage.
var (
	_ rls.Rules  = decide.Rules{}
	_ rls.Router = (*decide.Groups)(nil)
)
