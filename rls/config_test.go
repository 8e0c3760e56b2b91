package rls

import (
	"errors"
	"strings"
	"testing"
)

// TestConfigErrors: a bad file is refused with an error that names the
// file and the fault.
func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"not yaml", "domain: [", "did not find expected"},
		{"empty file", "", "empty file"},
		{"no domain", "descriptors: []", "empty domain"},
		{"unknown field", "domain: d\ndescriptors:\n  - key: k\n    colour: red", "field colour not found"},
		{"unknown rate_limit field", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, speed: 2}", "field speed not found"},
		{"empty key", "domain: d\ndescriptors:\n  - value: v", "descriptor has empty key"},
		{"duplicate key", "domain: d\ndescriptors:\n  - key: k\n  - key: k", "duplicate descriptor composite key 'd.k'"},
		{"duplicate nested", "domain: d\ndescriptors:\n  - key: k\n    descriptors:\n      - {key: a, value: b}\n      - {key: a, value: b}", "duplicate descriptor composite key 'd.k.a_b'"},
		{"bad unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}", "invalid rate limit unit 'fortnight'"},
		{"no unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {requests_per_unit: 1}", "invalid rate limit unit ''"},
		{"unlimited with unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: second}", "should not specify rate limit unit when unlimited"},
		{"negative requests", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: -1}", "cannot unmarshal"},
		{"empty replaces", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: ''}]}", "empty replaces entry"},
		{"replaces itself", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, name: a, replaces: [{name: a}]}", "replaces should not contain name of same descriptor"},
		{"share_threshold without wildcard", "domain: d\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true", "share_threshold can only be used with wildcard"},
		{"unknown algorithm", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: leaky}", `unknown algorithm "leaky"`},
		{"burst 0", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, burst: 0}", "burst 0 out of range"},
		{"burst too large", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, burst: 1099511627777}", "out of range"},
		{"burst on a window", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: fixed-window, burst: 3}", "burst applies to the gcra algorithm only"},
		{"algorithm when unlimited", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, algorithm: gcra}", "do not apply to an unlimited"},
		{"faster than a nanosecond", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 2000000000}", "zero rate or period"},
		{"two documents", "domain: d\n---\ndomain: e", "one YAML document per file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := newConfig().add("f.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("add(%q) = nil, want an error containing %q", tt.yaml, tt.want)
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "f.yaml") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("add(%q) = %q, want ErrConfig naming f.yaml and containing %q", tt.yaml, err, tt.want)
			}
		})
	}
}

// TestDuplicateDomain: a domain may be configured in one file only.
func TestDuplicateDomain(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.yaml", "domain: d\n")
	writeFile(t, dir, "b.yml", "domain: d\n")
	if _, err := LoadDir(dir); err == nil || !strings.Contains(err.Error(), `duplicate domain "d"`) || !strings.Contains(err.Error(), "b.yml") {
		t.Fatalf("LoadDir = %v; want a duplicate domain error naming b.yml", err)
	}
}

// TestLoadDirFiles: only .yaml and .yml files that are not hidden are read,
// in name order.
func TestLoadDirFiles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "b.yaml", "domain: b\n")
	writeFile(t, dir, "a.yml", "domain: a\n")
	writeFile(t, dir, ".hidden.yaml", "not: valid: yaml:\n")
	writeFile(t, dir, "notes.txt", "anything")
	c, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Domains() != 2 || len(c.Files) != 2 || !strings.HasSuffix(c.Files[0], "a.yml") {
		t.Errorf("LoadDir: %d domains from %v; want a.yml then b.yaml", c.Domains(), c.Files)
	}
	if _, err := LoadDir(dir + "/missing"); err == nil {
		t.Error("LoadDir of a missing directory = nil error")
	}
}

// TestGlobMatch: '*' matches any run of bytes, anywhere in the pattern.
func TestGlobMatch(t *testing.T) {
	tests := []struct {
		pattern, value string
		want           bool
	}{
		{"a*", "a", true},
		{"a*", "abc", true},
		{"a*", "ba", false},
		{"*c", "abc", true},
		{"a*c", "ac", true},
		{"a*c", "abbc", true},
		{"a*c", "abcd", false},
		{"ab*ba", "aba", false},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "acb", false},
		{"*", "", true},
		{"x", "x", true},
	}
	for _, tt := range tests {
		if got := globMatch(strings.Split(tt.pattern, "*"), tt.value); got != tt.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tt.pattern, tt.value, got, tt.want)
		}
	}
}
