package resp

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/cellserver/cellserver/engine"
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
	constant := func(v string) func() string { return func() string { return v } }
	builtin := []Setting{
		{Name: "bind", Get: constant(host)},
		// The configured port, as Redis reports it: 0 means no plaintext
		// port (a TLS-only server), whatever the listener is.
		{Name: "port", Get: constant(port)},
		{Name: "requirepass", Get: func() string { return *s.requirePass.Load() }, Set: func(v string) error {
			s.requirePass.Store(&v)
			return nil
		}},
		{Name: "maxclients", Get: func() string { return itoa(s.maxClients.Load()) }, Set: func(v string) error {
			n, err := setting.Must("maxclients").ParseLive(v)
			if err != nil {
				return err
			}
			if fit := s.cfg.FitClients; fit != nil && n > s.maxClients.Load() {
				if err := fit(int(min(n, 1<<31))); err != nil {
					return err
				}
			}
			s.maxClients.Store(n)
			return nil
		}},
		{Name: "timeout", Get: func() string { return itoa(s.timeout.Load() / int64(time.Second)) }, Set: func(v string) error {
			n, err := setting.Must("timeout").ParseLive(v)
			if err != nil {
				return err
			}
			s.timeout.Store(n * int64(time.Second))
			return nil
		}},
		{Name: "loglevel", Get: func() string {
			if s.cfg.LogLevel == nil {
				return "notice"
			}
			return LogLevelName(s.cfg.LogLevel.Level())
		}},
		{Name: "proto-max-bulk-len", Get: func() string { return itoa(s.maxBulk.Load()) }, Set: func(v string) error {
			n, err := setting.Must("proto-max-bulk-len").ParseLive(v)
			if err != nil {
				return err
			}
			s.maxBulk.Store(n)
			return nil
		}},
		{Name: "client-query-buffer-limit", Get: func() string { return itoa(s.queryLimit.Load()) }, Set: func(v string) error {
			n, err := setting.Must("client-query-buffer-limit").ParseLive(v)
			if err != nil {
				return err
			}
			s.queryLimit.Store(n)
			return nil
		}},
		{Name: "transaction-max-commands", Get: func() string { return itoa(s.txMaxCmds.Load()) }, Set: func(v string) error {
			n, err := setting.Must("transaction-max-commands").ParseLive(v)
			if err != nil {
				return err
			}
			s.txMaxCmds.Store(n)
			return nil
		}},
		{Name: "transaction-max-bytes", Get: func() string { return itoa(s.txMaxBytes.Load()) }, Set: func(v string) error {
			n, err := setting.Must("transaction-max-bytes").ParseLive(v)
			if err != nil {
				return err
			}
			s.txMaxBytes.Store(n)
			return nil
		}},
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
		{Name: "max-waiting", Get: func() string { return itoa(s.waits.maxWaiting.Load()) }, Set: func(v string) error {
			n, err := setting.Must("max-waiting").ParseLive(v)
			if err != nil {
				return err
			}
			s.waits.maxWaiting.Store(n)
			return nil
		}},
		{Name: "client-query-timeout", Get: func() string { return itoa(s.queryTime.Load() / int64(time.Second)) }, Set: func(v string) error {
			n, err := setting.Must("client-query-timeout").ParseLive(v)
			if err != nil {
				return err
			}
			s.queryTime.Store(n * int64(time.Second))
			return nil
		}},
		{Name: "slowlog-log-slower-than", Get: func() string { return itoa(s.slowlog.SlowerThan()) }, Set: func(v string) error {
			n, err := setting.Must("slowlog-log-slower-than").ParseLive(v)
			if err != nil {
				return err
			}
			s.slowlog.SetSlowerThan(n)
			return nil
		}},
		{Name: "slowlog-max-len", Get: func() string { return itoa(s.slowlog.MaxLen()) }, Set: func(v string) error {
			n, err := setting.Must("slowlog-max-len").ParseLive(v)
			if err != nil {
				return err
			}
			s.slowlog.SetMaxLen(n)
			return nil
		}},
		{Name: "maxmemory", Get: func() string { return itoa(s.maxMemory.Load()) }, Set: func(v string) error {
			n, err := setting.Must("maxmemory").ParseLive(v)
			if err != nil {
				return err
			}
			s.maxMemory.Store(n)
			s.cmem.Update(s.maxMemory.Load()) // a share of maxmemory follows it
			return nil
		}},
		{Name: "maxmemory-clients", Get: func() string { return s.cmem.Setting().String() }, Set: func(v string) error {
			l, err := ParseClientMemoryLimit(v)
			if err != nil {
				return err
			}
			s.cmem.SetLimit(l, s.maxMemory.Load())
			return nil
		}},
		{Name: "maxmemory-policy", Get: func() string { return MemoryPolicy(s.policy.Load()).String() }, Set: func(v string) error {
			w, err := setting.Must("maxmemory-policy").ParseWord(v)
			if err != nil {
				return err
			}
			p, err := ParseMemoryPolicy(w)
			if err != nil {
				return err
			}
			s.policy.Store(int32(p))
			return nil
		}},
		{Name: "client-output-buffer-limit", Get: func() string { return s.outLimits.Load().String() }, Set: func(v string) error {
			l, err := ParseOutputLimits(v, *s.outLimits.Load())
			if err != nil {
				return err
			}
			s.outLimits.Store(&l)
			return nil
		}},
		{Name: "protected-mode", Get: func() string {
			if s.protected.Load() {
				return "yes"
			}
			return "no"
		}, Set: func(v string) error {
			b, err := setting.ParseYesNo(v)
			if err != nil {
				return errors.New("argument must be 'yes' or 'no'")
			}
			s.protected.Store(b)
			return nil
		}},
		s.hotkeysSetting(),
		{Name: "databases", Get: constant("1")},
		{Name: "appendonly", Get: constant("no")},
		{Name: "save", Get: constant("")},
		{Name: "dbfilename", Get: constant("dump.rdb")},
		{Name: "dir", Get: func() string { d, _ := os.Getwd(); return d }},
	}
	builtin = append(builtin, s.classSettings()...)
	if s.cfg.LogLevel != nil {
		builtin[5].Set = func(v string) error {
			w, err := setting.Must("loglevel").ParseWord(v)
			if err != nil {
				return err
			}
			l, err := ParseLogLevel(w)
			if err != nil {
				return err
			}
			s.cfg.LogLevel.Set(l)
			return nil
		}
	}
	builtin = append(builtin, s.policySettings()...)
	reg, err := setting.NewRegistry(builtin, s.cfg.Settings, func(name string) bool { return fallbackSettings[name] })
	if err != nil {
		return fmt.Errorf("resp: %w", err)
	}
	s.settings = reg
	return nil
}

// liveSettings lists the settings CONFIG SET may change, from the settings
// table.
func liveSettings() string {
	var names []string
	for _, s := range setting.Table {
		if s.Live {
			names = append(names, s.Name)
		}
	}
	return strings.Join(names, ", ")
}

// ParseLogLevel maps Redis's log levels to slog: debug → Debug, verbose →
// Debug+2, notice → Info, warning → Warn.
func ParseLogLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "verbose":
		return slog.LevelDebug + 2, nil
	case "notice":
		return slog.LevelInfo, nil
	case "warning":
		return slog.LevelWarn, nil
	}
	return 0, fmt.Errorf("invalid log level %q (want debug, verbose, notice or warning)", s)
}

// LogLevelName is the Redis name of an slog level (see ParseLogLevel).
func LogLevelName(l slog.Level) string {
	switch {
	case l < slog.LevelDebug+2:
		return "debug"
	case l < slog.LevelInfo:
		return "verbose"
	case l < slog.LevelWarn:
		return "notice"
	}
	return "warning"
}

func configGetHandler(c *Conn, args [][]byte) error {
	patterns := make([]string, len(args)-2)
	for i, p := range args[2:] {
		patterns[i] = string(p)
	}
	match := c.srv.settings.Match(patterns, func(p, name string) bool { return globMatch([]byte(p), []byte(name)) })
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
	if err := c.srv.settings.Set(names, values, func(name string, err error) {
		c.srv.log.Error("CONFIG SET: restoring a setting failed", "setting", name, "err", err)
	}); err != nil {
		return err
	}
	c.WriteOK()
	return nil
}

func configRewriteHandler(c *Conn, _ [][]byte) error {
	return c.srv.rewriteConfig(c)
}

func configResetstatHandler(c *Conn, _ [][]byte) error {
	c.srv.resetStats()
	c.WriteOK()
	return nil
}

// rewriteConfig runs CONFIG REWRITE: one at a time (two would race on the
// file), with the live settings' values as CONFIG GET shows them.
func (s *Server) rewriteConfig(c *Conn) error {
	if s.cfg.ConfigFile == "" || s.cfg.RewriteConfig == nil {
		return errNoConfigFile
	}
	s.rewriteMu.Lock()
	err := s.cfg.RewriteConfig(s.settings.Value)
	s.rewriteMu.Unlock()
	if err != nil {
		s.log.Warn("CONFIG REWRITE failed", "file", s.cfg.ConfigFile, "err", err)
		return &argRefusal{refuseConfigRewrite, err.Error()}
	}
	s.log.Info("CONFIG REWRITE executed with success", "file", s.cfg.ConfigFile)
	c.WriteOK()
	return nil
}
