package keyclass

import "testing"

// TestFormatStable: the value CONFIG GET and CONFIG REWRITE write for
// metrics-class, from what an operator typed (patterns quoted only when
// they must be). These outputs are the format's contract.
func TestFormatStable(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"login login:* api  api:v?:*", "login login:* api api:v?:*"},
		{`a 'x y' b "" c #x d é:*`, `a "x y" b "" c "#x" d "é:*"`},
		{" a.b_c-1 [a]* ", "a.b_c-1 [a]*"},
	}
	for _, tt := range tests {
		rs, err := ParseRules(tt.in)
		if got := rs.String(); err != nil || got != tt.want {
			t.Errorf("ParseRules(%q).String() = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
