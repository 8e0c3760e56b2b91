package resp

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/setting"
)

// Setting is one parameter of CONFIG GET and CONFIG SET. The built-in
// live settings parse and range-check their values with internal/setting's
// table, which also words their errors.
type Setting struct {
	// Name is the parameter's name, lower case, as in redis.conf.
	Name string
	// Get returns the current value.
	Get func() string
	// Set changes the value live; nil makes the parameter read-only
	// ("can't set immutable config"). Its error is shown to the client.
	Set func(value string) error
	// Fallback settings are used only when no other setting (built in, or
	// in Config.Settings) has the name: a generic read-only view of every
	// configured setting, which the servers' own live ones override.
	Fallback bool
	// Batch, when not nil, completes Set for settings that change
	// together (the TLS files: a certificate and its key): Set only
	// records the value, and CONFIG SET calls Batch.Apply once, after
	// every Set of the command, for all the settings that share it.
	Batch *SettingBatch
}

// SettingBatch takes into effect the values its settings' Set recorded.
// Apply either applies them all or changes nothing and returns why; CONFIG
// SET then puts the recorded values back with Set.
type SettingBatch struct {
	Apply func() error
}

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
		{Name: "slowlog-log-slower-than", Get: func() string { return itoa(s.slowlog.slowerThan.Load()) }, Set: func(v string) error {
			n, err := setting.Must("slowlog-log-slower-than").ParseLive(v)
			if err != nil {
				return err
			}
			s.slowlog.slowerThan.Store(n)
			return nil
		}},
		{Name: "slowlog-max-len", Get: func() string { return itoa(s.slowlog.maxLen.Load()) }, Set: func(v string) error {
			n, err := setting.Must("slowlog-max-len").ParseLive(v)
			if err != nil {
				return err
			}
			s.slowlog.maxLen.Store(n)
			return nil
		}},
		{Name: "maxmemory", Get: func() string { return itoa(s.maxMemory.Load()) }, Set: func(v string) error {
			n, err := setting.Must("maxmemory").ParseLive(v)
			if err != nil {
				return err
			}
			s.maxMemory.Store(n)
			s.updateClientMemoryLimit() // a share of maxmemory follows it
			return nil
		}},
		{Name: "maxmemory-clients", Get: func() string { return s.cmem.setting.Load().String() }, Set: func(v string) error {
			l, err := ParseClientMemoryLimit(v)
			if err != nil {
				return err
			}
			s.setClientMemoryLimit(l)
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
	s.setting = make(map[string]*Setting)
	for i := range builtin {
		s.setting[builtin[i].Name] = &builtin[i]
	}
	for _, fallback := range []bool{false, true} {
		for i := range s.cfg.Settings {
			st := &s.cfg.Settings[i]
			if st.Fallback != fallback {
				continue
			}
			name := strings.ToLower(st.Name)
			_, dup := s.setting[name]
			switch {
			case st.Get == nil:
				return fmt.Errorf("resp: setting %q has no getter", name)
			case dup && fallback:
				continue
			case dup && !fallbackSettings[name]:
				return fmt.Errorf("resp: setting %q defined twice", name)
			}
			s.setting[name] = st
		}
	}
	for _, st := range s.setting {
		s.setlist = append(s.setlist, st)
	}
	sort.Slice(s.setlist, func(i, j int) bool { return s.setlist[i].Name < s.setlist[j].Name })
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

func configCommand() *Command {
	return &Command{
		Name: "config", Arity: -2, Flags: FlagAdmin | FlagNoScript | FlagLoading | FlagStale, Group: "server", Since: "0.1.0",
		Summary: "Reads and changes the server's settings.", Complexity: "Depends on the subcommand",
		Subcommands: []*Command{
			{
				Name: "get", Arity: -3, Flags: FlagAdmin | FlagNoScript | FlagLoading | FlagStale, Group: "server", Since: "0.1.0",
				Summary: "Returns the settings matching glob patterns.", Complexity: "O(N) where N is the number of settings",
				Args:  []Arg{{Name: "parameter", Type: "string", Multiple: true, Doc: "a glob pattern over setting names"}},
				Reply: "Map (flat array in RESP2) of setting names to values.",
				Handler: func(c *Conn, args [][]byte) error {
					var match []*Setting
					for _, st := range c.srv.setlist {
						for _, p := range args[2:] {
							if globMatch([]byte(strings.ToLower(string(p))), []byte(st.Name)) {
								match = append(match, st)
								break
							}
						}
					}
					c.WriteMap(len(match))
					for _, st := range match {
						c.WriteBulkString(st.Name)
						c.WriteBulkString(st.Get())
					}
					return nil
				},
			},
			{
				Name: "set", Arity: -4, Flags: FlagAdmin | FlagNoScript | FlagLoading | FlagStale, Group: "server", Since: "0.1.0",
				Summary: "Changes settings live: " + liveSettings() + " (docs/configuration.md).", Complexity: "O(N) where N is the number of settings",
				Args: []Arg{{Name: "data", Type: "block", Multiple: true, Args: []Arg{
					{Name: "parameter", Type: "string"}, {Name: "value", Type: "string"},
				}}},
				Reply: "Simple string OK.",
				Errors: []string{"`ERR Unknown option or number of arguments for CONFIG SET - '<name>'`.",
					"`ERR CONFIG SET failed (possibly related to argument '<name>') - <reason>` for a read-only setting, a bad value, or a parameter named twice (`duplicate parameter`); nothing is changed."},
				Handler: func(c *Conn, args [][]byte) error {
					if len(args)%2 != 0 {
						return &arityError{"config|set"}
					}
					// Check every pair first so that a bad one changes nothing.
					sts := make([]*Setting, 0, len(args)/2)
					for i := 2; i < len(args); i += 2 {
						name := strings.ToLower(string(args[i]))
						st := c.srv.setting[name]
						if st == nil {
							return &textError{"ERR Unknown option or number of arguments for CONFIG SET - '" + string(clip(args[i])) + "'"}
						}
						if st.Set == nil {
							return &textError{"ERR CONFIG SET failed (possibly related to argument '" + name + "') - can't set immutable config"}
						}
						if slices.Contains(sts, st) {
							// Redis 7 refuses a parameter named twice (and
							// names it as given).
							return &textError{"ERR CONFIG SET failed (possibly related to argument '" + string(clip(args[i])) + "') - duplicate parameter"}
						}
						sts = append(sts, st)
					}
					// Apply in order; a value refused after others were
					// applied puts those back, as Redis 7 does.
					old := make([]string, len(sts))
					for k, st := range sts {
						old[k] = st.Get()
						if err := st.Set(string(args[2+2*k+1])); err != nil {
							for j := k - 1; j >= 0; j-- {
								if rerr := sts[j].Set(old[j]); rerr != nil {
									c.srv.log.Error("CONFIG SET: restoring a setting failed", "setting", sts[j].Name, "err", rerr)
								}
							}
							return &textError{"ERR CONFIG SET failed (possibly related to argument '" + st.Name + "') - " + err.Error()}
						}
					}
					// Settings that change together take effect once,
					// after all their values are recorded.
					var applied []*SettingBatch
					for _, st := range sts {
						if st.Batch == nil || slices.Contains(applied, st.Batch) {
							continue
						}
						applied = append(applied, st.Batch)
						if err := st.Batch.Apply(); err != nil {
							for j := len(sts) - 1; j >= 0; j-- {
								if rerr := sts[j].Set(old[j]); rerr != nil {
									c.srv.log.Error("CONFIG SET: restoring a setting failed", "setting", sts[j].Name, "err", rerr)
								}
							}
							return &textError{"ERR CONFIG SET failed (possibly related to argument '" + st.Name + "') - " + err.Error()}
						}
					}
					c.WriteOK()
					return nil
				},
			},
			{
				Name: "rewrite", Arity: 2, Flags: FlagAdmin | FlagNoScript | FlagLoading | FlagStale, Group: "server", Since: "0.1.0",
				Summary: "Writes the settings in force, CONFIG SET's changes and the flags included, into the configuration file the server started with, keeping its comments and order.", Complexity: "O(N) where N is the number of settings",
				Reply: "Simple string OK.",
				Errors: []string{"`ERR The server is running without a config file`.",
					"`ERR Rewriting config file: <reason>` when the file cannot be read or replaced; it is left as it was."},
				Handler: func(c *Conn, _ [][]byte) error {
					return c.srv.rewriteConfig(c)
				},
			},
			{
				Name: "resetstat", Arity: 2, Flags: FlagAdmin | FlagNoScript | FlagLoading | FlagStale, Group: "server", Since: "0.1.0",
				Summary: "Resets the statistics INFO reports.", Complexity: "O(N) where N is the number of clients",
				Reply: "Simple string OK.",
				Handler: func(c *Conn, _ [][]byte) error {
					c.srv.resetStats()
					c.WriteOK()
					return nil
				},
			},
		},
	}
}

// rewriteConfig runs CONFIG REWRITE: one at a time (two would race on the
// file), with the live settings' values as CONFIG GET shows them.
func (s *Server) rewriteConfig(c *Conn) error {
	if s.cfg.ConfigFile == "" || s.cfg.RewriteConfig == nil {
		return &textError{"ERR The server is running without a config file"}
	}
	live := func(name string) (string, bool) {
		st := s.setting[name]
		if st == nil || st.Set == nil {
			return "", false
		}
		return st.Get(), true
	}
	s.rewriteMu.Lock()
	err := s.cfg.RewriteConfig(live)
	s.rewriteMu.Unlock()
	if err != nil {
		s.log.Warn("CONFIG REWRITE failed", "file", s.cfg.ConfigFile, "err", err)
		return &textError{"ERR Rewriting config file: " + err.Error()}
	}
	s.log.Info("CONFIG REWRITE executed with success", "file", s.cfg.ConfigFile)
	c.WriteOK()
	return nil
}
