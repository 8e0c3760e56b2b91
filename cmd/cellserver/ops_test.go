package main

import (
	"log/slog"
	"testing"

	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/resp"
)

// TestProtectedModeWarning: a server that listens beyond loopback with
// protected mode on and no password starts with a warning (clients of
// other hosts are refused per connection); any other combination starts
// silently.
func TestProtectedModeWarning(t *testing.T) {
	tests := []struct {
		bind      string
		pass      string
		protected bool
		warn      bool
	}{
		{"0.0.0.0", "", true, true},
		{"10.0.0.5", "", true, true},
		{"::", "", true, true},
		{"0.0.0.0", "s3cret", true, false},
		{"0.0.0.0", "", false, false},
		{"127.0.0.1", "", true, false},
		{"::1", "", true, false},
		{"localhost", "", true, false},
	}
	for _, tt := range tests {
		c := DefaultConfig()
		c.Bind, c.RequirePass, c.Ops.ProtectedMode = tt.bind, tt.pass, tt.protected
		if err := c.validateOps(); err != nil {
			t.Errorf("bind %s, requirepass %q, protected-mode %v: validateOps = %v, want the server to start", tt.bind, tt.pass, tt.protected, err)
		}
		if got := c.protectedModeWarning() != ""; got != tt.warn {
			t.Errorf("bind %s, requirepass %q, protected-mode %v: warning %v, want %v", tt.bind, tt.pass, tt.protected, got, tt.warn)
		}
	}
}

// TestProtectedModeLiveSetting: the directive reaches the RESP server,
// whose CONFIG SET protected-mode changes it live.
func TestProtectedModeLiveSetting(t *testing.T) {
	for _, on := range []bool{true, false} {
		c := DefaultConfig()
		c.Ops.ProtectedMode = on
		rc := c.ServerConfig(new(slog.LevelVar), slog.Default())
		if rc.ProtectedMode != on {
			t.Errorf("protected-mode %v: resp.Config.ProtectedMode = %v", on, rc.ProtectedMode)
		}
		if _, err := resp.NewServer(rc, decide.NewLocal(nil, func() int64 { return 0 })); err != nil {
			t.Errorf("protected-mode %v: NewServer: %v", on, err)
		}
	}
}
