package limitpolicy

import "testing"

// TestFormatStable: the values CONFIG GET, CONFIG REWRITE and a
// replicated setting write for limit-override and limit-shadow, from what
// an operator typed (the canonical form: periods in whole seconds or ms,
// patterns quoted only when they must be). These outputs are the format's
// contract: a change here changes what a rewritten configuration file and
// a group's log hold.
func TestFormatStable(t *testing.T) {
	overrides := []struct{ in, want string }{
		{"", ""},
		{"  ", ""},
		{"vip:* 100 1000 60", "vip:* 100 1000 60"},
		{"vip:* 100 1000 60000ms  'a b' 0 1 500ms", `vip:* 100 1000 60 "a b" 0 1 500ms`},
		{`"q\"x" 1 2 1m x* 5 5 1h '' 1 1 2d #c 3 3 1500ms`, `"q\"x" 1 2 60 x* 5 5 3600 "" 1 1 172800 "#c" 3 3 1500ms`},
		{"vip:* 1 1 1", "vip:* 1 1 1"},
		{"é:* 2 2 90s", `"é:*" 2 2 90`},
	}
	for _, tt := range overrides {
		o, err := ParseOverrides(tt.in)
		if got := FormatOverrides(o); err != nil || got != tt.want {
			t.Errorf("FormatOverrides(ParseOverrides(%q)) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	shadow := []struct{ in, want string }{
		{"", ""},
		{"a:*", "a:*"},
		{"  a:*   b:? ", "a:* b:?"},
		{`'x y' "q'" '' #h é`, `"x y" "q'" "" "#h" "é"`},
		{`[a-c]*\*`, `[a-c]*\*`},
	}
	for _, tt := range shadow {
		s, err := ParseShadow(tt.in)
		if got := FormatShadow(s); err != nil || got != tt.want {
			t.Errorf("FormatShadow(ParseShadow(%q)) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
