package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRegionDirectives(t *testing.T) {
	base := []string{"--region", "us", "--region-peer", "eu 10.0.0.1:6379,10.0.0.2:6379", "--region-peer", "ap 10.1.0.1:6379"}
	tests := []struct {
		name    string
		args    []string
		wantErr string // "" for a valid configuration
	}{
		{"regions off", nil, ""},
		{"three regions", append(base, "--region-policy", "api:* global us", "--region-policy", "q:* split c:* async",
			"--region-weight", "us 2", "--region-peer-password", "eu s3cret", "--region-unreachable", "deny"), ""},
		{"peer without region", []string{"--region-peer", "eu 10.0.0.1:6379"}, "need region"},
		{"bad region name", []string{"--region", "u s"}, "letters, digits"},
		{"peer named twice", append(base, "--region-peer", "eu 10.0.0.3:6379"), "named twice"},
		{"peer named as this region", append(base, "--region-peer", "us 10.0.0.3:6379"), "named twice"},
		{"peer without address", []string{"--region", "us", "--region-peer", "eu"}, "NAME VALUE pairs"},
		{"weight of no region", append(base, "--region-weight", "mars 2"), "no such region"},
		{"weight out of range", append(base, "--region-weight", "eu 0"), "outside"},
		{"home that is no region", append(base, "--region-policy", "x:* global mars"), "neither this region nor a region-peer"},
		{"unknown mode", append(base, "--region-policy", "x:* everywhere"), "unknown mode"},
		{"password of no peer", append(base, "--region-peer-password", "mars hunter2"), "no such region-peer"},
		{"password without a value", append(base, "--region-peer-password", "eu"), "NAME PASSWORD pairs"},
		{"unreachable word", append(base, "--region-unreachable", "maybe"), "region-unreachable"},
		{"sync interval too short", append(base, "--region-sync-interval", "0s"), "region-sync-interval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _, err := parseArgs(tt.args, &bytes.Buffer{})
			if err == nil {
				err = cfg.Validate()
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("%q: %v", tt.args, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("%q: %v, want an error with %q", tt.args, err, tt.wantErr)
			case err != nil && (strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "s3cret")):
				t.Fatalf("the error shows a password: %v", err)
			}
		})
	}
}

// TestRegionConfigFile: repeated lines add up, and CONFIG GET shows the
// peers' passwords redacted.
func TestRegionConfigFile(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "c.conf")
	text := "region us\nregion-peer eu 10.0.0.1:6379\nregion-peer ap 10.1.0.1:6379\nregion-peer-password eu s3cret\n" +
		"region-policy \"api:*\" global us\nregion-policy q:* split\nregion-weight us 3\n"
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := parseArgs([]string{conf}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	gc, err := cfg.gateConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(gc.Peers) != 2 || gc.Peers[0].Password != "s3cret" || gc.Policy.String() != "api:* global us q:* split" || gc.Weights["us"] != 3 {
		t.Errorf("gate configuration %+v (policy %q)", gc, gc.Policy.String())
	}
	for _, s := range cfg.tableSettings() {
		if s.Name == "region-peer-password" && s.Get() != "" {
			t.Errorf("CONFIG GET region-peer-password = %q, want it redacted", s.Get())
		}
	}
}

// TestRegionQuoting: a password with a space or a quote, as
// docs/regions.md writes one, reaches its peer whole from a configuration
// file (quoted as redis.conf quotes: double quotes with escapes, single
// quotes), from a flag (the value quoted the same way) and through
// CONFIG REWRITE's value; so does a quoted region-policy pattern.
func TestRegionQuoting(t *testing.T) {
	want := map[string]string{"eu": "eu's requirepass", "ap": `ap "the" pass`, "sa": `back\slash it's`}
	check := func(t *testing.T, cfg Config) {
		t.Helper()
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		gc, err := cfg.gateConfig(nil)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, p := range gc.Peers {
			got[p.Name] = p.Password
		}
		for name, pw := range want {
			if got[name] != pw {
				t.Errorf("peer %s password %q, want %q", name, got[name], pw)
			}
		}
		if s := gc.Policy.String(); !strings.HasPrefix(s, `"login *" global us`) {
			t.Errorf("policy %q, want the pattern \"login *\" whole", s)
		}
	}
	peers := "region us\nregion-peer eu e:1\nregion-peer ap a:1\nregion-peer sa s:1\n"
	file := peers + "region-peer-password eu \"eu's requirepass\"\n" +
		"region-peer-password ap 'ap \"the\" pass'\n" +
		"region-peer-password sa \"back\\\\slash it\\x27s\"\n" +
		"region-policy \"login *\" global us\n"
	t.Run("file", func(t *testing.T) {
		conf := filepath.Join(t.TempDir(), "c.conf")
		if err := os.WriteFile(conf, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, _, err := parseArgs([]string{conf}, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		check(t, cfg)
		// The value as CONFIG REWRITE and a flag carry it: one word.
		again, _, err := parseArgs([]string{"--region", "us", "--region-peer", "eu e:1", "--region-peer", "ap a:1", "--region-peer", "sa s:1",
			"--region-peer-password", cfg.Region.Passwords.String(), "--region-policy", cfg.Region.Policy.String()}, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		check(t, again)
	})
	t.Run("flags", func(t *testing.T) {
		cfg, _, err := parseArgs([]string{"--region", "us", "--region-peer", "eu e:1", "--region-peer", "ap a:1", "--region-peer", "sa s:1",
			"--region-peer-password", `eu "eu's requirepass"`, "--region-peer-password", `ap 'ap "the" pass'`,
			"--region-peer-password", `sa "back\\slash it's"`, "--region-policy", `"login *" global us`}, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		check(t, cfg)
	})
}
