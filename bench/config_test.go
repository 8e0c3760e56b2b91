package main

import (
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-preset", "gcra", "-compare", "127.0.0.1:1", "-compare-preset", "set", "-c", "8", "-P", "16", "-sweep-c", "1, 10,50", "-d", "2s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Cmd != "CL.THROTTLE {key} 15 30 60" || cfg.CompareCmd != "SET {key} v" {
		t.Errorf("commands = %q / %q, want the gcra and set presets", cfg.Cmd, cfg.CompareCmd)
	}
	if cfg.Conns != 8 || cfg.Pipeline != 16 || cfg.Duration != 2*time.Second || cfg.Rounds != 3 {
		t.Errorf("cfg = %+v", cfg)
	}
	if got := cfg.ConnCounts(); !reflect.DeepEqual(got, []int{1, 10, 50}) {
		t.Errorf("ConnCounts() = %v, want [1 10 50]", got)
	}

	// Without -compare-cmd, server B gets the same load as A.
	cfg, err = parseFlags([]string{"-cmd", "SET {key} x", "-compare", "127.0.0.1:1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CompareCmd != "SET {key} x" {
		t.Errorf("CompareCmd = %q, want A's command", cfg.CompareCmd)
	}
	if cfg.CompareKeys != 100000 {
		t.Errorf("CompareKeys = %d, want A's keyspace (the -keys default, 100000)", cfg.CompareKeys)
	}
	if got := cfg.ConnCounts(); !reflect.DeepEqual(got, []int{50}) {
		t.Errorf("ConnCounts() = %v, want [50] (the -c default)", got)
	}
}

func TestParseFlagsRejects(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-preset", "nope"}, "-preset"},
		{[]string{"-c", "0"}, "-c 0"},
		{[]string{"-P", "0"}, "-P 0"},
		{[]string{"-keys", "0"}, "-keys"},
		{[]string{"-compare-keys", "-1"}, "-compare-keys"},
		{[]string{"-dist", "normal"}, "-dist"},
		{[]string{"-dist", "zipf", "-zipf-s", "1"}, "-zipf-s"},
		{[]string{"-d", "0s"}, "-d"},
		{[]string{"-rounds", "0"}, "-rounds"},
		{[]string{"-format", "xml"}, "-format"},
		{[]string{"-sweep-c", "1,x"}, "-sweep-c"},
		{[]string{"-sweep-c", "0,10"}, "-sweep-c"},
		{[]string{"-plot", "out.pdf"}, "-plot"},
		{[]string{"-cmd", `SET {key} "open`}, "unbalanced"},
		{[]string{"SET", "{key}"}, "unexpected arguments"},
	}
	for _, tt := range tests {
		_, err := parseFlags(tt.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseFlags(%q) error = %v, want one mentioning %q", tt.args, err, tt.want)
		}
	}
}

func TestPresetsParse(t *testing.T) {
	for name, line := range presets() {
		tmpl, err := parseTemplate(line, "0123abcd")
		if err != nil {
			t.Errorf("preset %s: %v", name, err)
			continue
		}
		if !tmpl.hasKey && name != "ping" {
			t.Errorf("preset %s (%q) has no {key}", name, line)
		}
	}
}
