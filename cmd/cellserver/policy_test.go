package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/internal/limitpolicy"
)

// TestRepeatableDirectives: limit-override and limit-shadow lines add up in
// a configuration file, the value round-trips through CONFIG REWRITE's
// quoting, and a bad rule is refused at start naming the setting.
func TestRepeatableDirectives(t *testing.T) {
	tests := []struct {
		file               string
		override, shadow   string
		wantErr            string
		wantRules, wantPat int
	}{
		{file: "limit-override vip:* 100 1000 60\nlimit-override \"abuse:*\" 0 1 1m\nlimit-shadow try:*\nlimit-shadow \"'a b*'\"\n",
			override: "vip:* 100 1000 60 abuse:* 0 1 1m", shadow: "try:* 'a b*'", wantRules: 2, wantPat: 2},
		// CONFIG REWRITE writes the whole value as one quoted word.
		{file: "limit-override \"'a b' 1 1 500ms vip:* 2 2 2\"\n", override: "'a b' 1 1 500ms vip:* 2 2 2", wantRules: 2},
		{file: "limit-override vip:* 1 1\n", wantErr: "limit-override"},
	}
	for _, tc := range tests {
		conf := filepath.Join(t.TempDir(), "c.conf")
		if err := os.WriteFile(conf, []byte(tc.file), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, _, err := parseArgs([]string{conf}, &bytes.Buffer{})
		if err == nil {
			err = cfg.Validate()
		}
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: err = %v, want one naming %s", tc.file, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.file, err)
		}
		if cfg.Ops.LimitOverride != tc.override || cfg.Ops.LimitShadow != tc.shadow {
			t.Errorf("%q: limit-override %q, limit-shadow %q; want %q, %q", tc.file, cfg.Ops.LimitOverride, cfg.Ops.LimitShadow, tc.override, tc.shadow)
		}
		p := cfg.Ops.limitPolicy()
		if len(p.Overrides()) != tc.wantRules || len(p.Shadow()) != tc.wantPat {
			t.Errorf("%q: %d rules, %d patterns; want %d, %d", tc.file, len(p.Overrides()), len(p.Shadow()), tc.wantRules, tc.wantPat)
		}
		if again, err := limitpolicy.ParseOverrides(limitpolicy.FormatOverrides(p.Overrides())); err != nil || len(again) != tc.wantRules {
			t.Errorf("%q: round trip = %v, %v", tc.file, again, err)
		}
	}
}
