package outlimit

import (
	"testing"
	"time"
)

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

// TestCheck follows one client's pending bytes through the limits: the
// soft limit's clock starts when they pass it, resets under it, and closes
// the client once the soft seconds run out; the hard limit closes at once.
func TestCheck(t *testing.T) {
	l := Limit{Hard: 100, Soft: 50, SoftSeconds: 2}
	t0 := time.Unix(1000, 0)
	var since time.Time
	for i, step := range []struct {
		pending int64
		at      time.Duration
		which   string
		over    bool
	}{
		{10, 0, "", false},
		{60, 0, "", true},           // the clock starts
		{60, time.Second, "", true}, // within the soft seconds
		{10, 1500 * time.Millisecond, "", false},
		{60, 2 * time.Second, "", true}, // started again
		{60, 4*time.Second + 1, "soft", true},
		{101, 0, "hard", true},
	} {
		which, over := l.Check(step.pending, &since, t0.Add(step.at))
		if which != step.which || over != step.over {
			t.Errorf("step %d: Check(%d) = %q, %v; want %q, %v", i, step.pending, which, over, step.which, step.over)
		}
	}
	if dl := (Limit{Hard: 100}).SoftDeadline(1000, &since, t0); !dl.IsZero() || !since.IsZero() {
		t.Errorf("no soft limit: deadline %v, since %v; want both zero", dl, since)
	}
}
