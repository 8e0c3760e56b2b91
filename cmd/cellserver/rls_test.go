package main

import (
	"io"
	"strings"
	"testing"
)

// TestRLSDirectives: the rate-limit service's directives parse, and ports
// that collide or an unknown header mode are refused by Validate.
func TestRLSDirectives(t *testing.T) {
	tests := []struct {
		args []string
		want string // "" when valid
	}{
		{[]string{"--rls-port", "8081", "--rls-config", "rules", "--rls-response-headers", "IETF"}, ""},
		{[]string{"--rls-port", "6379"}, "rls-port and port are both 6379"},
		{[]string{"--rls-port", "6380", "--tls-port", "6380", "--tls-cert-file", "c", "--tls-key-file", "k", "--tls-auth-clients", "no"}, "rls-port and tls-port are both 6380"},
		{[]string{"--rls-port", "70000"}, "rls-port"},
		{[]string{"--rls-response-headers", "draft"}, "rls-response-headers"},
	}
	for _, tt := range tests {
		cfg, _, err := parseArgs(tt.args, io.Discard)
		if err == nil {
			err = cfg.Validate()
		}
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%v: %v, want valid", tt.args, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%v: %v, want an error containing %q", tt.args, err, tt.want)
		}
		if tt.want == "" && (cfg.RLS.Port != 8081 || cfg.RLS.ConfigDir != "rules" || cfg.RLS.ResponseHeaders != "ietf") {
			t.Errorf("%v: parsed %+v", tt.args, cfg.RLS)
		}
	}
}
