package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecretFiles: each secret file fills its secret setting (trailing
// newlines dropped); a secret given both ways, an empty file and a missing
// one are refused with the setting and the file named, never the secret.
func TestSecretFiles(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pw := file("pw", "s3cret pass\n")
	cs := file("cs", "cluster\r\n")
	eu := file("eu", "eu's pass\n")
	empty := file("empty", "\n")
	missing := filepath.Join(dir, "missing")

	cfg, _, err := parseArgs([]string{"--requirepass-file", pw, "--cluster-secret-file", cs,
		"--region", "us", "--region-peer", "eu 127.0.0.1:1", "--region-peer-password-file", "eu " + eu}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := cfg.readSecretFiles(); err != nil {
		t.Fatal(err)
	}
	if cfg.RequirePass != "s3cret pass" || cfg.Cluster.Secret != "cluster" {
		t.Errorf("requirepass %q, cluster-secret %q; want %q, %q", cfg.RequirePass, cfg.Cluster.Secret, "s3cret pass", "cluster")
	}
	gc, err := cfg.gateConfig(nil)
	if err != nil || len(gc.Peers) != 1 || gc.Peers[0].Password != "eu's pass" {
		t.Errorf("gateConfig: peers %+v, %v; want eu with the file's password", gc.Peers, err)
	}

	for _, tt := range []struct {
		args []string
		want string // in the error
	}{
		{[]string{"--requirepass", "x", "--requirepass-file", pw}, "requirepass and requirepass-file are both set"},
		{[]string{"--cluster-secret", "x", "--cluster-secret-file", cs}, "cluster-secret and cluster-secret-file are both set"},
		{[]string{"--requirepass-file", empty}, "requirepass-file " + empty + ": the file is empty"},
		{[]string{"--requirepass-file", missing}, "requirepass-file: cannot read the secret: open " + missing},
		{[]string{"--cluster-secret-file", missing}, "cluster-secret-file: cannot read the secret: open " + missing},
		{[]string{"--region-peer-password-file", "eu " + eu}, "region-peer-password-file needs region"},
		{[]string{"--region", "us", "--region-peer", "eu 127.0.0.1:1", "--region-peer-password-file", "fr " + eu}, "region-peer-password-file fr: no such region-peer"},
		{[]string{"--region", "us", "--region-peer", "eu 127.0.0.1:1", "--region-peer-password", "eu x", "--region-peer-password-file", "eu " + eu}, "region eu has both"},
		{[]string{"--region", "us", "--region-peer", "eu 127.0.0.1:1", "--region-peer-password-file", "eu " + missing}, "region-peer-password-file eu: cannot read the secret: open " + missing},
	} {
		cfg, _, err := parseArgs(tt.args, &bytes.Buffer{})
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil {
			err = cfg.readSecretFiles()
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v; want an error with %q", tt.args, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q: error %v shows the secret", tt.args, err)
		}
	}
}

// TestRewriteKeepsSecretFiles: CONFIG REWRITE of a server whose secrets
// come from files keeps the files' paths and writes no secret.
func TestRewriteKeepsSecretFiles(t *testing.T) {
	pw := writeFile(t, "s3cret\n")
	conf := writeFile(t, "port 7000\nrequirepass-file "+pw+"\n")
	given, _, err := parseArgs([]string{conf, "--cluster-secret-file", pw}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if err := given.readSecretFiles(); err != nil {
		t.Fatal(err)
	}
	live := map[string]string{"requirepass": given.RequirePass}
	if err := given.rewriter()(func(n string) (string, bool) { v, ok := live[n]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(conf)
	if strings.Contains(string(b), "s3cret") || !strings.Contains(string(b), "cluster-secret-file "+pw) {
		t.Errorf("rewritten file:\n%s\nwant the secret files named and no secret", b)
	}
	back, _, err := parseArgs([]string{conf}, &bytes.Buffer{})
	if err == nil {
		err = back.Validate()
	}
	if err != nil {
		t.Errorf("rewritten file does not load: %v", err)
	}
}
