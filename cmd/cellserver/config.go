package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/setting"
	"github.com/cellserver/cellserver/resp"
	"github.com/cellserver/cellserver/shards"
	"github.com/cellserver/cellserver/snapshot"
)

// Config is the server's configuration: redis.conf directives, given in a
// configuration file and/or as --flags of the same names (flags win).
type Config struct {
	Bind        string // address to listen on
	Port        int    // TCP port, 0..65535 (0: no plaintext port)
	RequirePass string // password clients must AUTH with (empty: none)
	MaxClients  int    // at least 1
	IOThreads   int    // event loops (0: resp.DefaultEventLoops)
	EventLoops  bool   // io-event-loops: serve plaintext clients on event loops
	Timeout     int    // idle seconds; 0 never
	LogLevel    string // debug, verbose, notice or warning
	Shards      int    // 0: shards' default for this machine
	SLMaxLimit  int64  // largest SL.ADD limit, 1..engine.MaxCount
	// PprofAddr serves net/http/pprof there (empty: off); see runtime.go.
	PprofAddr string
	// Persist is standalone persistence (dir, dbfilename, save,
	// snapshot-ignore-corrupt; see persist.go).
	Persist snapshot.Config
	// InMemory (save "") runs a standalone server in memory only: no
	// snapshot is loaded, saved periodically or written at shutdown, and
	// SAVE and BGSAVE answer that persistence is off.
	InMemory bool
	// Cluster holds the cluster directives (cluster.go); off unless
	// node-id is set.
	Cluster clusterConfig
	// Ops holds TLS, protected mode, limits, the slow log, maxmemory and
	// metrics (ops.go).
	Ops opsConfig
	// RLS holds Envoy's rate-limit service directives (rls.go).
	RLS rlsConfig
	// Region holds the region layer's directives (regions.go).
	Region regionConfig
	// Secrets are the files the secrets are read from (secretfiles.go).
	Secrets secretFiles
	// File is the configuration file read, if any.
	File string
}

// DefaultConfig returns Redis's defaults (and cellserver's own).
func DefaultConfig() Config {
	return Config{
		Bind:       "127.0.0.1",
		Port:       6379,
		MaxClients: 10000,
		EventLoops: true,
		LogLevel:   "notice",
		SLMaxLimit: engine.DefaultMaxLogLimit,
		Persist:    snapshot.DefaultConfig(),
		Cluster:    defaultClusterConfig(),
		Ops:        defaultOpsConfig(),
		RLS:        defaultRLSConfig(),
		Region:     defaultRegionConfig(),
	}
}

// directive binds a setting of internal/setting's table (name, kind and
// parser, range, default, help) to its field in Config. Adding a setting is
// one entry in setting.Table, one here (or in persist.go, cluster.go,
// ops.go) and its field in Config. A YesNo setting may also stand alone as
// a flag (--bootstrap means --bootstrap yes); see yesNoFlag.
type directive struct {
	name  string
	field func(c *Config) any // a pointer to the field; see setting.Spec.Set
	spec  *setting.Spec
}

// set parses v into c's field with the table's parser. Ranges are checked
// by Validate.
func (d directive) set(c *Config, v string) error { return d.spec.Set(d.field(c), v) }

// bindDirectives looks every binding up in setting.Table; it panics on a
// name the table lacks or on a table entry left unbound.
func bindDirectives(ds ...[]directive) []directive {
	var all []directive
	bound := map[string]bool{}
	for _, l := range ds {
		for _, d := range l {
			d.spec = setting.Must(d.name)
			if bound[d.name] {
				panic("cellserver: directive " + d.name + " bound twice")
			}
			bound[d.name] = true
			all = append(all, d)
		}
	}
	for _, s := range setting.Table {
		if !bound[s.Name] {
			panic("cellserver: setting " + s.Name + " has no field in Config")
		}
	}
	return all
}

// directives are every setting, bound: the core ones below, then
// persist.go's (dir, dbfilename, save, snapshot-ignore-corrupt),
// cluster.go's (node-id, raft-*) and ops.go's (tls-*, limits, maxmemory,
// slowlog, metrics).
var directives = bindDirectives(coreDirectives, persistDirectives, clusterDirectives, opsDirectives, rlsDirectives, regionDirectives, secretFileDirectives)

var coreDirectives = []directive{
	{name: "bind", field: func(c *Config) any { return &c.Bind }},
	{name: "port", field: func(c *Config) any { return &c.Port }},
	{name: "requirepass", field: func(c *Config) any { return &c.RequirePass }},
	{name: "maxclients", field: func(c *Config) any { return &c.MaxClients }},
	{name: "io-threads", field: func(c *Config) any { return &c.IOThreads }},
	{name: "io-event-loops", field: func(c *Config) any { return &c.EventLoops }},
	{name: "timeout", field: func(c *Config) any { return &c.Timeout }},
	{name: "loglevel", field: func(c *Config) any { return &c.LogLevel }},
	{name: "shards", field: func(c *Config) any { return &c.Shards }},
	{name: "pprof-addr", field: func(c *Config) any { return &c.PprofAddr }},
	{name: "sl-max-limit", field: func(c *Config) any { return &c.SLMaxLimit }},
}

// isYesNo reports whether d is a yes/no directive.
func isYesNo(d directive) bool { return d.spec.Kind == setting.YesNo }

// yesNoFlag is a yes/no directive as a flag. IsBoolFlag lets it stand alone
// (the flag package then sets "true"); --name=no and, through
// joinYesNoValues, --name no set a value.
type yesNoFlag struct {
	set  func(v string) error
	last string
}

func (f *yesNoFlag) String() string { return f.last }

func (f *yesNoFlag) Set(v string) error {
	if err := f.set(v); err != nil {
		return err
	}
	f.last = v
	return nil
}

func (f *yesNoFlag) IsBoolFlag() bool { return true }

// joinYesNoValues rewrites "--name word" as "--name=word" when name is a
// yes/no flag and word is not a flag: the flag package would otherwise
// take a boolean flag alone and word as the first positional argument.
// Any such word is joined, not only yes or no, so that "--bootstrap maybe"
// is reported as a bad value. It walks args as fs.Parse will (other flags'
// values skipped, nothing looked at after "--" or the first non-flag).
func joinYesNoValues(fs *flag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || len(a) < 2 || a[0] != '-' {
			return append(out, args[i:]...)
		}
		out = append(out, a)
		name := strings.TrimPrefix(a[1:], "-")
		if strings.Contains(name, "=") || i+1 == len(args) {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue // fs.Parse reports it
		}
		if _, ok := f.Value.(*yesNoFlag); ok {
			if next := args[i+1]; !strings.HasPrefix(next, "-") {
				out[len(out)-1] = a + "=" + next
				i++
			}
			continue
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		i++ // the flag's value, whatever it looks like
		out = append(out, args[i])
	}
	return out
}

// Validate reports whether c can start a server.
func (c *Config) Validate() error {
	var errs []error
	// Every range and every enum's words, worded by the settings table.
	for _, d := range directives {
		if err := d.spec.Check(d.field(c)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := (shards.Config{Shards: c.Shards}).Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Persist.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.validateCluster(); err != nil {
		errs = append(errs, err)
	}
	if err := c.validateOps(); err != nil {
		errs = append(errs, err)
	}
	if err := c.validateRLS(); err != nil {
		errs = append(errs, err)
	}
	if err := c.validateRegion(); err != nil {
		errs = append(errs, err)
	}
	if err := c.validateSecretFiles(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Addr is the listen address.
func (c *Config) Addr() string { return net.JoinHostPort(c.Bind, strconv.Itoa(c.Port)) }

// ServerConfig maps c to the RESP server's configuration.
func (c *Config) ServerConfig(level *slog.LevelVar, logger *slog.Logger) resp.Config {
	rc := resp.DefaultConfig()
	rc.Addr = c.Addr()
	rc.RequirePass = c.RequirePass
	rc.MaxClients = c.MaxClients
	rc.FitClients = liveMaxClients(reservedFor(c))
	switch {
	case !c.EventLoops:
		rc.EventLoops = 0
	case c.IOThreads > 0:
		rc.EventLoops = c.IOThreads
	}
	if c.Region.Name != "" {
		// A global key's decision waits on another region, and an event
		// loop must never wait (as in cluster mode).
		rc.EventLoops = 0
	}
	rc.Timeout = time.Duration(c.Timeout) * time.Second
	rc.Parse = engine.ParseOptions{MaxLogLimit: c.SLMaxLimit}
	rc.Logger = logger
	rc.LogLevel = level
	rc.ConfigFile = c.File
	c.applyOps(&rc)
	rc.Settings = append(rc.Settings, c.rlsSettings()...)
	rc.InfoSections = append(rc.InfoSections, c.rlsInfo()...)
	rc.Settings = append(rc.Settings, c.regionSettings()...)
	rc.Settings = append(rc.Settings, c.tableSettings()...)
	return rc
}

// options are the command line's actions besides serving.
type options struct {
	version         bool
	genDocs         bool
	genConfigDocs   bool
	genSampleConfig bool
	// assignSlots: join the groups at these RESP addresses into one
	// Redis Cluster and exit (assignslots.go).
	assignSlots string
}

// parseArgs reads an optional configuration file (the first argument, when
// it is not a flag) and then the flags, which win over the file.
func parseArgs(args []string, stderr io.Writer) (Config, options, error) {
	cfg := DefaultConfig()
	var opt options
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cfg.File = args[0]
		if err := readConfigFile(&cfg, args[0]); err != nil {
			return cfg, opt, err
		}
		args = args[1:]
	}
	fs := flag.NewFlagSet("cellserver", flag.ContinueOnError)
	// The flag package prints its error and the whole usage on any bad
	// flag; only --help prints the usage here, a bad flag is one line.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	for _, d := range directives {
		set := func(v string) error { return d.set(&cfg, v) }
		if isYesNo(d) {
			fs.Var(&yesNoFlag{set: set}, d.name, d.spec.Usage())
			continue
		}
		fs.Func(d.name, d.spec.Usage(), set)
	}
	fs.BoolVar(&opt.version, "version", false, "print the version and exit")
	fs.BoolVar(&opt.genDocs, "gen-docs", false, "print docs/commands.md (generated from the command table) and exit")
	fs.BoolVar(&opt.genConfigDocs, "gen-config-docs", false, "print docs/configuration.md (generated from the settings table) and exit")
	fs.BoolVar(&opt.genSampleConfig, "gen-sample-config", false, "print deploy/cellserver.conf (every setting, commented out at its default; generated from the settings table) and exit")
	fs.StringVar(&opt.assignSlots, "assign-slots", "", "HOST:PORT,HOST:PORT,...: join the groups with a node at each RESP address into one Redis Cluster (slots split evenly on a new cluster; free slots to the groups that hold keys; CLUSTER MEET), with requirepass or requirepass-file as the password, and exit (the Helm chart's slot Job)")
	if err := fs.Parse(joinYesNoValues(fs, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(fs, stderr)
			return cfg, opt, err
		}
		return cfg, opt, fmt.Errorf("%w (see cellserver --help)", err)
	}
	if fs.NArg() > 0 {
		return cfg, opt, fmt.Errorf("unexpected argument %q (the config file must come first)", fs.Arg(0))
	}
	return cfg, opt, nil
}

// printUsage writes --help: every flag with two dashes, as the docs spell
// them (the flag package accepts one or two).
func printUsage(fs *flag.FlagSet, w io.Writer) {
	var b strings.Builder
	b.WriteString("usage: cellserver [config-file] [--directive value ...]\n\n" +
		"Directives (also in the config file, redis.conf syntax). A yes/no directive\n" +
		"given alone means yes: --bootstrap is --bootstrap yes (also --bootstrap=no).\n")
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		b.WriteString("  --" + f.Name)
		if name != "" {
			b.WriteString(" " + name)
		}
		b.WriteString("\n    \t" + strings.ReplaceAll(usage, "\n", "\n    \t") + "\n")
	})
	io.WriteString(w, b.String())
}

// readConfigFile applies a redis.conf-style file: one directive per line,
// its arguments separated by spaces (quoted as Redis quotes them; see
// setting.SplitLine), # starts a comment line. An unknown directive is an error naming the file
// and line.
func readConfigFile(cfg *Config, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	seen := map[string]bool{}
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		words, err := setting.SplitLine(text)
		if err != nil {
			return fmt.Errorf("config %s:%d: %w", path, line, err)
		}
		name := strings.ToLower(words[0])
		d := lookupDirective(name)
		if d == nil {
			return fmt.Errorf("config %s:%d: unknown directive %q", path, line, words[0])
		}
		v := setting.DirectiveValue(words[1:]) // a list-valued setting reads the same words
		if prev, ok := d.field(cfg).(*string); ok && d.spec.Repeatable && seen[name] && *prev != "" {
			v = *prev + " " + v // a repeated line adds to the value
		}
		seen[name] = true
		if err := d.set(cfg, v); err != nil {
			return fmt.Errorf("config %s:%d: %s: %w", path, line, name, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}
