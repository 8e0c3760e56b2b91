package region

import (
	"strings"
	"testing"

	"github.com/cellserver/cellserver/internal/setting"
)

// TestPolicyFormatStable: the value CONFIG GET and CONFIG REWRITE write
// for region-policy, from what an operator typed (modes in lower case,
// patterns quoted only when they must be). These outputs are the format's
// contract.
func TestPolicyFormatStable(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"user:* split", "user:* split"},
		{"api:* global eu  user:* SPLIT  * local", "api:* global eu user:* split * local"},
		{`'a b' ASYNC "" Global r1 #x local é:* split`, `"a b" async "" global r1 "#x" local "é:*" split`},
	}
	for _, tt := range tests {
		words, err := setting.SplitLine(strings.TrimSpace(tt.in))
		if err != nil {
			t.Fatal(err)
		}
		p, err := ParsePolicy(words)
		if err != nil {
			t.Errorf("ParsePolicy(%q): %v", tt.in, err)
			continue
		}
		if got := p.String(); got != tt.want {
			t.Errorf("ParsePolicy(%q).String() = %q, want %q", tt.in, got, tt.want)
		}
	}
}
