package outlimit

import "testing"

// TestParse checks the setting's syntax.
func TestParse(t *testing.T) {
	def := Default()
	for _, tc := range []struct {
		in   string
		want Limits
		ok   bool
	}{
		{"normal 0 0 0", Limits{Replica: def.Replica, PubSub: def.PubSub}, true},
		{"NORMAL 1mb 512kb 10", Limits{Normal: Limit{1 << 20, 512 << 10, 10}, Replica: def.Replica, PubSub: def.PubSub}, true},
		{"slave 1 2 3 pubsub 4 5 6", Limits{Normal: def.Normal, Replica: Limit{1, 2, 3}, PubSub: Limit{4, 5, 6}}, true},
		{"", def, false},
		{"normal 1 2", def, false},
		{"other 1 2 3", def, false},
		{"normal -1 2 3", def, false},
		{"normal 1 2 x", def, false},
	} {
		got, err := Parse(tc.in, def)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	if got, err := Parse(def.String(), Limits{}); err != nil || got != def {
		t.Errorf("Parse(String()) = %+v, %v; want %+v", got, err, def)
	}
}
