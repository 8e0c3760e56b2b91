package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/resp"
)

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cellserver.conf")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestParseArgs: the file applies first, flags win over it.
func TestParseArgs(t *testing.T) {
	conf := writeFile(t, "# a comment\n\nport 7000\nbind 0.0.0.0\nrequirepass \"two words\"\nMAXCLIENTS 50\ntimeout 30\nloglevel warning\nshards 64\nsl-max-limit 500\n")
	cfg, _, err := parseArgs([]string{conf, "--port", "7001", "--loglevel=debug"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.Bind, want.Port, want.RequirePass, want.MaxClients, want.Timeout = "0.0.0.0", 7001, "two words", 50, 30
	want.LogLevel, want.Shards, want.SLMaxLimit, want.File = "debug", 64, 500, conf
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("parseArgs = %+v,\nwant %+v", cfg, want)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	def, _, err := parseArgs(nil, &bytes.Buffer{})
	if err != nil || !reflect.DeepEqual(def, DefaultConfig()) {
		t.Errorf("no arguments = %+v, %v; want the defaults", def, err)
	}
}

func TestParseArgsErrors(t *testing.T) {
	unknown := writeFile(t, "port 7000\nactivedefrag yes\n")
	quotes := writeFile(t, "requirepass \"open\n")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{unknown}, unknown + `:2: unknown directive "activedefrag"`},
		{[]string{quotes}, quotes + ":1: unbalanced quotes"},
		{[]string{"/nonexistent/cellserver.conf"}, "no such file"},
		{[]string{"--port", "x"}, `not an integer: "x"`},
		{[]string{"--nosuch"}, "flag provided but not defined"},
		{[]string{"--port", "1", "extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		_, _, err := parseArgs(tt.args, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseArgs(%q) error = %v, want it to contain %q", tt.args, err, tt.want)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		mutate func(*Config)
		want   string
	}{
		{func(c *Config) { c.Port = 70000 }, "port 70000"},
		{func(c *Config) { c.MaxClients = 0 }, "maxclients 0"},
		{func(c *Config) { c.Timeout = -1 }, "timeout -1"},
		{func(c *Config) { c.LogLevel = "loud" }, `loglevel: expected debug, verbose, notice or warning, got "loud"`},
		{func(c *Config) { c.Ops.MaxMemoryPolicy = "allkeys-lru" }, `maxmemory-policy: expected noeviction or volatile-ttl`},
		{func(c *Config) { c.Ops.TLSAuthClients = "maybe" }, `tls-auth-clients: expected yes, no or optional`},
		{func(c *Config) { c.Cluster.Raft.AppendFsync = "sometimes" }, `appendfsync: expected always, everysec or no`},
		{func(c *Config) { c.Cluster.Raft.HeartbeatTimeout = time.Millisecond }, "raft-heartbeat-timeout 1ms must be at least 5ms"},
		{func(c *Config) { c.Cluster.Raft.MaxInflight = 0 }, "raft-max-inflight 0 must be at least 1"},
		{func(c *Config) { c.Shards = 3 }, "not a power of two"},
		{func(c *Config) { c.SLMaxLimit = 0 }, "sl-max-limit 0"},
		{func(c *Config) { c.InMemory, c.Cluster.NodeID, c.Cluster.RaftAddr = true, "n1", "127.0.0.1:8001" }, `save "" (in memory only) is for a standalone server`},
	}
	for _, tt := range tests {
		c := DefaultConfig()
		tt.mutate(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate = %v, want it to contain %q", err, tt.want)
		}
	}
}

func TestRunVersionAndDocs(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"--version"}, &out, &bytes.Buffer{}); err != nil || out.String() != "cellserver "+resp.Version+"\n" {
		t.Errorf("--version = %q, %v", out.String(), err)
	}
	out.Reset()
	if err := run([]string{"--gen-docs"}, &out, &bytes.Buffer{}); err != nil || !bytes.Equal(out.Bytes(), resp.CommandsMarkdown()) {
		t.Errorf("--gen-docs printed %d bytes, %v; want the generated docs", out.Len(), err)
	}
	if err := run([]string{"--maxclients", "0"}, &out, &bytes.Buffer{}); err == nil {
		t.Error("run with maxclients 0 succeeded, want a validation error")
	}
}

// TestValidateClusterPortZero: a cluster node without a plaintext port is
// refused with the reason (nodes talk over it, so no TLS-only cluster),
// and the message suggests nothing that would be refused too.
func TestValidateClusterPortZero(t *testing.T) {
	for _, advertise := range []string{"", "127.0.0.1:7001"} {
		c := DefaultConfig()
		c.Port, c.Ops.TLSPort = 0, 7443
		c.Ops.TLSCertFile, c.Ops.TLSKeyFile, c.Ops.TLSCACertFile = "cert.pem", "key.pem", "ca.pem"
		c.Cluster.NodeID, c.Cluster.RaftAddr, c.Cluster.RespAdvertise = "n1", "127.0.0.1:8001", advertise
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), "cannot run TLS-only") || strings.Contains(err.Error(), "resp-advertise") {
			t.Errorf("Validate with port 0, resp-advertise %q = %v; want the plaintext port required, a cluster cannot run TLS-only, and no resp-advertise advice", advertise, err)
		}
	}
}
