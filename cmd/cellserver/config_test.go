package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/internal/setting"
	"github.com/cellserver/cellserver/resp"
)

// TestYesNoFlags: a yes/no directive given alone means yes, and still takes
// a value as a separate word or after "=", wherever it stands.
func TestYesNoFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want func(c *Config)
	}{
		{"bare", []string{"--bootstrap"}, func(c *Config) { c.Cluster.Bootstrap = true }},
		{"bare, one dash", []string{"-raft-local-reads"}, func(c *Config) { c.Cluster.Raft.LocalReads = true }},
		{"separate yes", []string{"--bootstrap", "yes"}, func(c *Config) { c.Cluster.Bootstrap = true }},
		{"separate no", []string{"--protected-mode", "no"}, func(c *Config) { c.Ops.ProtectedMode = false }},
		{"joined no", []string{"--protected-mode=no"}, func(c *Config) { c.Ops.ProtectedMode = false }},
		{"joined yes", []string{"--snapshot-ignore-corrupt=yes"}, func(c *Config) { c.Persist.IgnoreCorrupt = true }},
		{"bare, then a flag", []string{"--bootstrap", "--port", "7000"}, func(c *Config) { c.Cluster.Bootstrap, c.Port = true, 7000 }},
		{"no, then a flag", []string{"--protected-mode", "no", "--port", "7000"}, func(c *Config) { c.Ops.ProtectedMode, c.Port = false, 7000 }},
		{"bare, last", []string{"--port", "7000", "--snapshot-ignore-corrupt"}, func(c *Config) { c.Port, c.Persist.IgnoreCorrupt = 7000, true }},
		{"no, last", []string{"--bootstrap", "--protected-mode", "no"}, func(c *Config) { c.Cluster.Bootstrap, c.Ops.ProtectedMode = true, false }},
		{"the last one wins", []string{"--bootstrap", "--bootstrap=no"}, func(c *Config) {}},
		{"true, false, 1, 0, any case", []string{"--protected-mode", "FALSE", "--bootstrap", "True", "--raft-local-reads", "1", "--snapshot-ignore-corrupt", "0"},
			func(c *Config) {
				c.Ops.ProtectedMode, c.Cluster.Bootstrap, c.Cluster.Raft.LocalReads = false, true, true
			}},
		{"another flag's value that looks like one", []string{"--requirepass", "--bootstrap", "--protected-mode", "No"},
			func(c *Config) { c.RequirePass, c.Ops.ProtectedMode = "--bootstrap", false }},
		{"after a plain boolean flag", []string{"--version", "--bootstrap", "yes"}, func(c *Config) { c.Cluster.Bootstrap = true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := parseArgs(tt.args, &bytes.Buffer{})
			if err != nil {
				t.Fatalf("parseArgs(%q): %v", tt.args, err)
			}
			want := DefaultConfig()
			tt.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("parseArgs(%q) = %+v,\nwant %+v", tt.args, got, want)
			}
		})
	}
}

// TestYesNoConfigFile: the file takes the same words, and a bare flag wins
// over it.
func TestYesNoConfigFile(t *testing.T) {
	conf := writeFile(t, "bootstrap yes\nprotected-mode No\nraft-local-reads TRUE\nsnapshot-ignore-corrupt 1\n")
	got, _, err := parseArgs([]string{conf}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.File = conf
	want.Cluster.Bootstrap, want.Ops.ProtectedMode, want.Cluster.Raft.LocalReads, want.Persist.IgnoreCorrupt = true, false, true, true
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseArgs(%q) = %+v,\nwant %+v", conf, got, want)
	}
	got, _, err = parseArgs([]string{conf, "--protected-mode", "--bootstrap=no"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want.Ops.ProtectedMode, want.Cluster.Bootstrap = true, false
	if !reflect.DeepEqual(got, want) {
		t.Errorf("file then --protected-mode --bootstrap=no = %+v,\nwant %+v", got, want)
	}
}

func TestYesNoErrors(t *testing.T) {
	maybe := writeFile(t, "port 7000\nbootstrap maybe\n")
	empty := writeFile(t, "protected-mode\n")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--bootstrap", "maybe"}, `invalid boolean value "maybe" for -bootstrap: expected yes or no, got "maybe"`},
		{[]string{"--protected-mode=perhaps"}, `expected yes or no, got "perhaps"`},
		{[]string{"--bootstrap="}, `expected yes or no, got ""`},
		{[]string{"--bootstrap", ""}, `expected yes or no, got ""`},
		{[]string{"--bootstrap", "--", "yes"}, `unexpected argument "yes"`},
		{[]string{maybe}, maybe + `:2: bootstrap: expected yes or no, got "maybe"`},
		{[]string{empty}, empty + `:1: protected-mode: expected yes or no, got ""`},
	}
	for _, tt := range tests {
		_, _, err := parseArgs(tt.args, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseArgs(%q) error = %v, want it to contain %q", tt.args, err, tt.want)
		}
	}
}

// TestYesNoDirectives: every directive that reads yes/no is found as one
// (which needs it to parse with setYesNo), and each takes every form.
func TestYesNoDirectives(t *testing.T) {
	found := map[string]bool{}
	for _, d := range directives {
		if isYesNo(d) {
			found[d.name] = true
			continue
		}
		c := DefaultConfig()
		if d.set(&c, "yes") == nil && d.set(&c, "no") == nil && d.set(&c, "maybe") != nil {
			t.Errorf("directive %s takes yes and no but is not a yes/no flag: parse it with setYesNo", d.name)
		}
	}
	for _, name := range []string{"bootstrap", "raft-local-reads", "protected-mode", "snapshot-ignore-corrupt"} {
		if !found[name] {
			t.Errorf("directive %s is not found as a yes/no directive", name)
		}
	}
	parse := func(args ...string) Config {
		t.Helper()
		c, _, err := parseArgs(args, &bytes.Buffer{})
		if err != nil {
			t.Fatalf("parseArgs(%q): %v", args, err)
		}
		return c
	}
	for name := range found {
		yes, no := parse("--"+name+"=yes"), parse("--"+name+"=no")
		if reflect.DeepEqual(yes, no) {
			t.Errorf("--%s=yes and --%s=no give the same configuration", name, name)
		}
		for _, args := range [][]string{{"--" + name}, {"--" + name, "yes"}, {"--" + name, "--port", "6379"}} {
			if got := parse(args...); !reflect.DeepEqual(got, yes) {
				t.Errorf("parseArgs(%q) differs from --%s=yes", args, name)
			}
		}
		for _, args := range [][]string{{"--" + name, "no"}, {"--" + name, "NO", "--port", "6379"}} {
			if got := parse(args...); !reflect.DeepEqual(got, no) {
				t.Errorf("parseArgs(%q) differs from --%s=no", args, name)
			}
		}
	}
}

// TestTableDefaults: every setting's default in internal/setting's table
// (the docs' and --help's) is DefaultConfig's, and is in its own range.
func TestTableDefaults(t *testing.T) {
	def := DefaultConfig()
	for _, d := range directives {
		c := DefaultConfig()
		if err := d.set(&c, d.spec.Default); err != nil {
			t.Errorf("directive %s: default %q: %v", d.name, d.spec.Default, err)
			continue
		}
		if !reflect.DeepEqual(c, def) {
			t.Errorf("directive %s: the table's default %q is not DefaultConfig's", d.name, d.spec.Default)
		}
		if err := d.spec.Check(d.field(&c)); err != nil {
			t.Errorf("directive %s: default out of range: %v", d.name, err)
		}
	}
}

func TestGenConfigDocs(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"--gen-config-docs"}, &out, &bytes.Buffer{}); err != nil || !bytes.Equal(out.Bytes(), setting.Markdown()) {
		t.Errorf("--gen-config-docs printed %d bytes, %v; want the generated configuration docs", out.Len(), err)
	}
}

// TestConfigGetEverySetting: CONFIG GET shows every setting of the table,
// with the value it was started with (a secret only as set or not).
func TestConfigGetEverySetting(t *testing.T) {
	c := DefaultConfig()
	c.Port = 0
	c.Shards = 64
	c.Cluster.Secret = "s3cret"
	c.Cluster.Raft.HeartbeatTimeout = 750 * time.Millisecond
	srv, err := resp.NewServer(c.ServerConfig(new(slog.LevelVar), slog.New(slog.DiscardHandler)), decide.NewLocal(nil, func() int64 { return 0 }))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	rc := redis.NewClient(&redis.Options{Addr: ln.Addr().String()})
	t.Cleanup(func() { rc.Close() })
	got, err := rc.ConfigGet(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range setting.Table {
		if _, ok := got[s.Name]; !ok {
			t.Errorf("CONFIG GET * lacks %s", s.Name)
		}
	}
	want := map[string]string{"shards": "64", "cluster-secret": "(redacted)", "raft-heartbeat-timeout": "750ms", "io-event-loops": "yes", "bootstrap": "no"}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("CONFIG GET %s = %q, want %q", name, got[name], v)
		}
	}
}
