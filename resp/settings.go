package resp

import (
	"fmt"
	"net"
	"os"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/clientmem"
	"github.com/cellserver/cellserver/internal/maxmemory"
	"github.com/cellserver/cellserver/internal/outlimit"
	"github.com/cellserver/cellserver/internal/setting"
)

// Setting is one parameter of CONFIG GET and CONFIG SET
// (internal/setting's Live). The built-in live settings parse and
// range-check their values with internal/setting's table, which also words
// their errors.
type Setting = setting.Live

// SettingBatch takes into effect the values its settings' Set recorded
// (internal/setting's Batch).
type SettingBatch = setting.Batch

// fallbackSettings may be replaced by Config.Settings of the same name.
var fallbackSettings = map[string]bool{"save": true, "appendonly": true, "dir": true, "dbfilename": true}

func (s *Server) initSettings() error {
	host, port, _ := net.SplitHostPort(s.cfg.Addr)
	builtin := []Setting{
		setting.LiveFixed("bind", host),
		// The configured port, as Redis reports it: 0 means no plaintext
		// port (a TLS-only server), whatever the listener is.
		setting.LiveFixed("port", port),
		{Name: "requirepass", Get: func() string { return *s.requirePass.Load() }, Set: func(v string) error {
			s.requirePass.Store(&v)
			return nil
		}},
		setting.LiveInt("maxclients", s.maxClients.Load, func(n int64) error {
			if fit := s.cfg.FitClients; fit != nil && n > s.maxClients.Load() {
				if err := fit(int(min(n, 1<<31))); err != nil {
					return err
				}
			}
			s.maxClients.Store(n)
			return nil
		}),
		setting.LiveSeconds("timeout", &s.timeout),
		s.logLevelSetting(),
		setting.LiveVar("proto-max-bulk-len", &s.maxBulk),
		setting.LiveVar("client-query-buffer-limit", &s.queryLimit),
		setting.LiveVar("transaction-max-commands", &s.txMaxCmds),
		setting.LiveVar("transaction-max-bytes", &s.txMaxBytes),
		{Name: "max-wait", Get: func() string { return engine.FormatDuration(s.waits.maxWait.Load()) }, Set: func(v string) error {
			n, err := engine.ParseDuration([]byte(v))
			if err == nil {
				err = setting.Must("max-wait").CheckRange(n)
			}
			if err != nil {
				return fmt.Errorf("argument must be a duration from 1ms to 1d (500ms, 10s): %w", err)
			}
			s.waits.maxWait.Store(n)
			return nil
		}},
		setting.LiveVar("max-waiting", &s.waits.maxWaiting),
		setting.LiveSeconds("client-query-timeout", &s.queryTime),
		setting.LiveInt("slowlog-log-slower-than", s.slowlog.SlowerThan, func(n int64) error { s.slowlog.SetSlowerThan(n); return nil }),
		setting.LiveInt("slowlog-max-len", s.slowlog.MaxLen, func(n int64) error { s.slowlog.SetMaxLen(n); return nil }),
		setting.LiveInt("maxmemory", s.mem.Limit, func(n int64) error {
			s.mem.SetLimit(n)
			s.cmem.Update(n) // a share of maxmemory follows it
			return nil
		}),
		setting.LiveFunc("maxmemory-clients", func() string { return s.cmem.Setting().String() }, clientmem.ParseLimit,
			func(l clientmem.Limit) { s.cmem.SetLimit(l, s.mem.Limit()) }),
		setting.LiveFunc("maxmemory-policy", func() string { return s.mem.Policy().String() }, setting.Words("maxmemory-policy", maxmemory.ParsePolicy),
			s.mem.SetPolicy),
		setting.LiveFunc("client-output-buffer-limit", func() string { return s.outLimits.Load().String() },
			func(v string) (outlimit.Limits, error) { return outlimit.Parse(v, *s.outLimits.Load()) },
			func(l outlimit.Limits) { s.outLimits.Store(&l) }),
		setting.LiveBool("protected-mode", &s.protected),
		s.hotkeysSetting(),
		setting.LiveFixed("databases", "1"),
		setting.LiveFixed("appendonly", "no"),
		setting.LiveFixed("save", ""),
		setting.LiveFixed("dbfilename", "dump.rdb"),
		{Name: "dir", Get: func() string { d, _ := os.Getwd(); return d }},
	}
	builtin = append(builtin, s.classSettings()...)
	builtin = append(builtin, s.policySettings()...)
	reg, err := setting.NewRegistry(builtin, s.cfg.Settings, func(name string) bool { return fallbackSettings[name] })
	if err != nil {
		return fmt.Errorf("resp: %w", err)
	}
	s.settings = reg
	return nil
}

// logLevelSetting is loglevel: notice and read-only without
// Config.LogLevel, else its level (setting.ParseLogLevel's words).
func (s *Server) logLevelSetting() Setting {
	lv := s.cfg.LogLevel
	if lv == nil {
		return setting.LiveFixed("loglevel", "notice")
	}
	return setting.LiveFunc("loglevel", func() string { return setting.LogLevelName(lv.Level()) },
		setting.Words("loglevel", setting.ParseLogLevel), lv.Set)
}

func configGetHandler(c *Conn, args [][]byte) error {
	match := c.srv.settings.Match(args[2:])
	c.WriteMap(len(match))
	for _, st := range match {
		c.WriteBulkString(st.Name)
		c.WriteBulkString(st.Get())
	}
	return nil
}

func configSetHandler(c *Conn, args [][]byte) error {
	if len(args)%2 != 0 {
		return &arityError{"config|set"}
	}
	// Every pair is checked first, so that a bad one changes
	// nothing; a value refused after others were applied
	// puts those back, as Redis 7 does (setting.Registry).
	names := make([]string, 0, len(args)/2-1)
	values := make([]string, 0, len(args)/2-1)
	for i := 2; i < len(args); i += 2 {
		names = append(names, string(args[i]))
		values = append(values, string(args[i+1]))
	}
	return okOr(c, c.srv.settings.Set(names, values, func(name string, err error) {
		c.srv.log.Error("CONFIG SET: restoring a setting failed", "setting", name, "err", err)
	}))
}

// configRewriteHandler writes the live settings into the configuration
// file (Config.RewriteConfig), one CONFIG REWRITE at a time.
func configRewriteHandler(c *Conn, _ [][]byte) error {
	s := c.srv
	if s.cfg.ConfigFile == "" || s.cfg.RewriteConfig == nil {
		return errNoConfigFile
	}
	if err := s.settings.Rewrite(s.cfg.RewriteConfig); err != nil {
		s.log.Warn("CONFIG REWRITE failed", "file", s.cfg.ConfigFile, "err", err)
		return refusal(refuseConfigRewrite, err.Error())
	}
	s.log.Info("CONFIG REWRITE executed with success", "file", s.cfg.ConfigFile)
	c.WriteOK()
	return nil
}

func configResetstatHandler(c *Conn, _ [][]byte) error {
	c.srv.resetStats()
	c.WriteOK()
	return nil
}
