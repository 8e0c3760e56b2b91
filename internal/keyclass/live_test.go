package keyclass

import "testing"

// TestLive checks that a change keeps the counts of the classes it keeps
// and that the zero Live is off.
func TestLive(t *testing.T) {
	var l Live
	if l.Current() != nil || l.Counts() != nil {
		t.Fatal("the zero Live is not off")
	}
	rs, err := ParseRules("login login:*")
	if err != nil {
		t.Fatal(err)
	}
	l.Update(func(c *Config) { *c = Config{Rules: rs, Limit: 2} })
	l.Current().Classify([]byte("login:a")).Count(0, true)
	l.Update(func(c *Config) { c.Limit = 5 })
	if got := l.Config(); got.Limit != 5 || got.Rules.String() != "login login:*" {
		t.Fatalf("Config() = %+v after changing the limit", got)
	}
	counts := l.Counts()
	if len(counts) == 0 || counts[0].Name != "login" || counts[0].Limited != 1 {
		t.Fatalf("Counts() = %+v; want login with 1 limited kept", counts)
	}
	l.Reset()
	if counts := l.Counts(); counts[0].Limited != 0 {
		t.Fatalf("after Reset: %+v", counts)
	}
}
