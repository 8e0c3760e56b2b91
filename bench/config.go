package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// presets maps a -preset name to its command line. The limiter parameters are
// ordinary ones (a burst of 16, a limit of 100 for the window kinds and the
// sliding log, a one-minute period); throughput hardly depends on them, except
// for the sliding log, whose cost grows with its limit.
func presets() map[string]string {
	return map[string]string{
		"set":      "SET {key} v",
		"get":      "GET {key}",
		"ping":     "PING",
		"gcra":     "CL.THROTTLE {key} 15 30 60",
		"gcra-all": "CL.THROTTLEALL {key} 15 30 60 1 {key}:b 15 30 60 1",
		"tb":       "TB.TAKE {key} 16 30 60s",
		"lb":       "LB.ADD {key} 16 30 60s",
		"fw":       "FW.INCR {key} 100 60s",
		"sw":       "SW.INCR {key} 100 60s",
		"sl":       "SL.ADD {key} 100 60s",
		// lua-gcra is the GCRA of gcra.lua, loaded with SCRIPT LOAD at
		// start-up; {sha} is replaced by the digest the server returns.
		"lua-gcra": "EVALSHA {sha} 1 {key} 15 30 60 1",
	}
}

// presetNames returns the preset names in a stable order, for the usage text.
func presetNames() []string {
	p := presets()
	names := make([]string, 0, len(p))
	for n := range p {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Config is one invocation of the generator.
type Config struct {
	Addr        string  // server A, host:port
	Cmd         string  // command line for A, with {key} (and {sha}) placeholders
	CompareAddr string  // server B; empty when not comparing
	CompareCmd  string  // command line for B; defaults to Cmd
	Auth        string  // password sent with AUTH on every connection; empty for none
	Conns       int     // connections (used when Sweep is empty)
	Pipeline    int     // requests written before the replies are read, >= 1
	Keys        int     // keyspace size, >= 1
	Dist        string  // "uniform" or "zipf"
	ZipfS       float64 // zipf exponent, > 1
	KeyPrefix   string  // prefix of every generated key
	// CompareKeyPrefix is server B's key prefix; it defaults to KeyPrefix and
	// must differ from it when A and B are one server running two commands,
	// or the commands would meet each other's keys (WRONGTYPE).
	CompareKeyPrefix string
	// CompareKeys is server B's keyspace size; 0 means Keys. With it, one
	// run compares a server holding many keys with one holding few.
	CompareKeys int
	Duration    time.Duration // measured time per round (when Requests is 0)
	Requests    int64         // requests per round; 0 means run for Duration
	Warmup      time.Duration // unmeasured load before each round
	Rounds      int           // rounds per server, >= 1
	Format      string        // "table", "csv" or "json"
	Sweep       []int         // connection counts to sweep; empty means just Conns
	Plot        string        // output .svg or .png; empty for none
	Script      string        // Lua file loaded with SCRIPT LOAD when a command uses {sha}; empty for the built-in gcra.lua
	Seed        uint64        // base seed of the key generators
	Quiet       bool          // no progress logs
}

// DefaultConfig returns the defaults documented in the flags.
func DefaultConfig() Config {
	return Config{
		Addr:      "127.0.0.1:6379",
		Cmd:       presets()["gcra"],
		Conns:     50,
		Pipeline:  1,
		Keys:      100000,
		Dist:      "uniform",
		ZipfS:     1.1,
		KeyPrefix: "k:",
		Duration:  5 * time.Second,
		Warmup:    time.Second,
		Rounds:    3,
		Format:    "table",
		Seed:      1,
	}
}

// Validate reports the first setting that cannot work.
func (c *Config) Validate() error {
	switch {
	case c.Addr == "":
		return errors.New("-addr is empty")
	case strings.TrimSpace(c.Cmd) == "":
		return errors.New("-cmd is empty")
	case c.Conns < 1:
		return fmt.Errorf("-c %d: need at least 1 connection", c.Conns)
	case c.Pipeline < 1:
		return fmt.Errorf("-P %d: pipeline depth must be at least 1", c.Pipeline)
	case c.Keys < 1:
		return fmt.Errorf("-keys %d: keyspace must hold at least 1 key", c.Keys)
	case c.CompareKeys < 0:
		return fmt.Errorf("-compare-keys %d: keyspace must hold at least 1 key (0 means as -keys)", c.CompareKeys)
	case c.Dist != "uniform" && c.Dist != "zipf":
		return fmt.Errorf("-dist %q: want uniform or zipf", c.Dist)
	case c.Dist == "zipf" && !(c.ZipfS > 1):
		return fmt.Errorf("-zipf-s %g: the exponent must be greater than 1", c.ZipfS)
	case c.Requests < 0:
		return fmt.Errorf("-n %d: negative request count", c.Requests)
	case c.Requests == 0 && c.Duration <= 0:
		return fmt.Errorf("-d %s: need a positive duration or -n", c.Duration)
	case c.Warmup < 0:
		return fmt.Errorf("-warmup %s: negative", c.Warmup)
	case c.Rounds < 1:
		return fmt.Errorf("-rounds %d: need at least 1", c.Rounds)
	case c.Format != "table" && c.Format != "csv" && c.Format != "json":
		return fmt.Errorf("-format %q: want table, csv or json", c.Format)
	}
	for _, n := range c.Sweep {
		if n < 1 {
			return fmt.Errorf("-sweep-c: %d connections", n)
		}
	}
	if c.Plot != "" {
		switch strings.ToLower(filepath.Ext(c.Plot)) {
		case ".svg", ".png":
		default:
			return fmt.Errorf("-plot %q: want a .svg or .png file", c.Plot)
		}
	}
	for _, cmd := range []string{c.Cmd, c.CompareCmd} {
		if cmd == "" {
			continue
		}
		if _, err := parseTemplate(cmd, "0"); err != nil {
			return err
		}
	}
	return nil
}

// ConnCounts returns the connection counts to measure, in order.
func (c *Config) ConnCounts() []int {
	if len(c.Sweep) > 0 {
		return c.Sweep
	}
	return []int{c.Conns}
}

// parseFlags turns the command line into a validated Config.
func parseFlags(args []string, stderr io.Writer) (Config, error) {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var preset, comparePreset, sweep string
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "server A `host:port`")
	fs.StringVar(&cfg.Cmd, "cmd", cfg.Cmd, "command line; {key} is replaced by a generated key")
	fs.StringVar(&preset, "preset", "", "named command instead of -cmd: "+strings.Join(presetNames(), "|"))
	fs.StringVar(&cfg.CompareAddr, "compare", "", "server B `host:port`: run interleaved rounds A, B, A, B … and print medians and ratios A/B")
	fs.StringVar(&cfg.CompareCmd, "compare-cmd", "", "command line for server B (default: the same as A)")
	fs.StringVar(&comparePreset, "compare-preset", "", "named command for server B")
	fs.StringVar(&cfg.Auth, "auth", "", "password sent with AUTH on each connection")
	fs.IntVar(&cfg.Conns, "c", cfg.Conns, "connections")
	fs.IntVar(&cfg.Pipeline, "P", cfg.Pipeline, "pipeline depth: requests written before reading their replies")
	fs.IntVar(&cfg.Keys, "keys", cfg.Keys, "keyspace size")
	fs.StringVar(&cfg.Dist, "dist", cfg.Dist, "key distribution: uniform|zipf")
	fs.Float64Var(&cfg.ZipfS, "zipf-s", cfg.ZipfS, "zipf exponent s (> 1; larger means hotter hot keys)")
	fs.StringVar(&cfg.KeyPrefix, "key-prefix", cfg.KeyPrefix, "prefix of every key")
	fs.IntVar(&cfg.CompareKeys, "compare-keys", 0, "keyspace size of server B (default: -keys)")
	fs.StringVar(&cfg.CompareKeyPrefix, "compare-key-prefix", "", "prefix of server B's keys (default: -key-prefix); use another one when A and B are one server")
	fs.DurationVar(&cfg.Duration, "d", cfg.Duration, "measured duration of each round")
	fs.Int64Var(&cfg.Requests, "n", 0, "requests per round instead of -d")
	fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "unmeasured load before each round")
	fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "rounds per server; figures are the median over rounds")
	fs.StringVar(&cfg.Format, "format", cfg.Format, "output: table|csv|json")
	fs.StringVar(&sweep, "sweep-c", "", "comma-separated connection counts to sweep, e.g. 1,10,50,100")
	fs.StringVar(&cfg.Plot, "plot", "", "write throughput-vs-connections and latency CDF to this .svg or .png")
	fs.StringVar(&cfg.Script, "script", "", "Lua `file` loaded with SCRIPT LOAD for {sha} (default: the built-in gcra.lua)")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "base seed of the key generators")
	fs.BoolVar(&cfg.Quiet, "q", false, "no progress logs")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q (quote the -cmd value)", fs.Args())
	}
	if preset != "" {
		cmd, ok := presets()[preset]
		if !ok {
			return cfg, fmt.Errorf("-preset %q: want one of %s", preset, strings.Join(presetNames(), ", "))
		}
		cfg.Cmd = cmd
	}
	if comparePreset != "" {
		cmd, ok := presets()[comparePreset]
		if !ok {
			return cfg, fmt.Errorf("-compare-preset %q: want one of %s", comparePreset, strings.Join(presetNames(), ", "))
		}
		cfg.CompareCmd = cmd
	}
	if cfg.CompareCmd == "" {
		cfg.CompareCmd = cfg.Cmd
	}
	if cfg.CompareKeyPrefix == "" {
		cfg.CompareKeyPrefix = cfg.KeyPrefix
	}
	if cfg.CompareKeys == 0 {
		cfg.CompareKeys = cfg.Keys
	}
	if sweep != "" {
		s, err := parseIntList(sweep)
		if err != nil {
			return cfg, fmt.Errorf("-sweep-c: %w", err)
		}
		cfg.Sweep = s
	}
	return cfg, cfg.Validate()
}

// parseIntList parses "1,10,50".
func parseIntList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}
