package setting

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestRegistrySet checks CONFIG SET's rules as the registry keeps them:
// every name checked first, values put back when a later one is refused,
// a shared batch applied once and its failure putting every value back.
func TestRegistrySet(t *testing.T) {
	vals := map[string]string{"a": "1", "b": "2", "c": "3", "d": "4"}
	applied := 0
	batchErr := error(nil)
	batch := &Batch{Apply: func() error { applied++; return batchErr }}
	live := func(name string, b *Batch) Live {
		return Live{Name: name, Get: func() string { return vals[name] }, Set: func(v string) error {
			if v == "bad" {
				return errors.New("bad value")
			}
			vals[name] = v
			return nil
		}, Batch: b}
	}
	builtin := []Live{live("a", nil), live("b", nil), {Name: "ro", Get: func() string { return "x" }}}
	added := []Live{live("c", batch), live("d", batch), {Name: "a", Get: func() string { return "shadowed" }, Fallback: true}}
	r, err := NewRegistry(builtin, added, func(string) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	noRestoreFail := func(name string, err error) { t.Errorf("restoring %s: %v", name, err) }
	for _, tc := range []struct {
		names, values []string
		want          string // the error's text, "" for none
		after         string // a b c d after
	}{
		{[]string{"A", "b"}, []string{"10", "20"}, "", "10 20 3 4"},
		{[]string{"a", "nope"}, []string{"11", "x"}, "unknown setting nope", "10 20 3 4"},
		{[]string{"ro"}, []string{"y"}, "ro: can't set immutable config", "10 20 3 4"},
		{[]string{"a", "A"}, []string{"1", "2"}, "A: duplicate parameter", "10 20 3 4"},
		{[]string{"a", "b"}, []string{"12", "bad"}, "b: bad value", "10 20 3 4"},
		{[]string{"c", "d", "a"}, []string{"30", "40", "13"}, "", "13 20 30 40"},
	} {
		err := r.Set(tc.names, tc.values, noRestoreFail)
		if got := errText(err); got != tc.want {
			t.Errorf("Set(%v, %v) = %q, want %q", tc.names, tc.values, got, tc.want)
		}
		if got := strings.Join([]string{vals["a"], vals["b"], vals["c"], vals["d"]}, " "); got != tc.after {
			t.Errorf("after Set(%v, %v): %s, want %s", tc.names, tc.values, got, tc.after)
		}
	}
	if applied != 1 {
		t.Errorf("the shared batch was applied %d times, want once", applied)
	}
	batchErr = errors.New("key does not match")
	if err := r.Set([]string{"a", "c"}, []string{"14", "31"}, noRestoreFail); errText(err) != "c: key does not match" {
		t.Errorf("failing batch: %v", err)
	}
	if vals["a"] != "13" || vals["c"] != "30" {
		t.Errorf("a failing batch left a=%s c=%s, want 13 30", vals["a"], vals["c"])
	}
	if v, ok := r.Value("ro"); ok || v != "" {
		t.Errorf("Value(ro) = %q, %v; want a read-only setting left out", v, ok)
	}
	if got := r.Match([][]byte{[]byte("*")}); len(got) != 5 || got[0].Name != "a" || got[0].Get() != "13" {
		t.Errorf("Match(*) = %d settings, first %s; want 5, a (the fallback shadowed)", len(got), got[0].Name)
	}
	if _, err := NewRegistry(builtin, []Live{live("b", nil)}, func(string) bool { return false }); err == nil {
		t.Error("a setting defined twice was accepted")
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestRegistryMatch: CONFIG GET's patterns are Redis globs in any letter
// case; a setting matched by two patterns is listed once.
func TestRegistryMatch(t *testing.T) {
	get := func() string { return "" }
	r, err := NewRegistry([]Live{{Name: "maxmemory", Get: get}, {Name: "maxmemory-policy", Get: get}, {Name: "timeout", Get: get}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		patterns []string
		want     string
	}{
		{[]string{"MAXMEMORY*"}, "maxmemory maxmemory-policy"},
		{[]string{"max?emory", "timeout", "*out"}, "maxmemory timeout"},
		{[]string{"[mt]*y"}, "maxmemory maxmemory-policy"},
		{[]string{"nothing"}, ""},
	} {
		var ps [][]byte
		for _, p := range tc.patterns {
			ps = append(ps, []byte(p))
		}
		var names []string
		for _, st := range r.Match(ps) {
			names = append(names, st.Name)
		}
		if got := strings.Join(names, " "); got != tc.want {
			t.Errorf("Match(%q) = %q, want %q", tc.patterns, got, tc.want)
		}
	}
}

// TestRegistryRewrite: CONFIG REWRITE's writer sees the live settings'
// values (read-only ones not), one call at a time.
func TestRegistryRewrite(t *testing.T) {
	v := "5"
	r, err := NewRegistry([]Live{{Name: "a", Get: func() string { return v }, Set: func(s string) error { v = s; return nil }},
		{Name: "ro", Get: func() string { return "x" }}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var inside atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := r.Rewrite(func(value func(string) (string, bool)) error {
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d rewrites at once, want 1", n)
				}
				defer inside.Add(-1)
				if got, ok := value("a"); got != "5" || !ok {
					t.Errorf("value(a) = %q, %v; want 5, true", got, ok)
				}
				if _, ok := value("ro"); ok {
					t.Error("value(ro) ok, want a read-only setting left out")
				}
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	boom := errors.New("disk full")
	if err := r.Rewrite(func(func(string) (string, bool)) error { return boom }); err != boom {
		t.Errorf("Rewrite = %v, want the writer's error", err)
	}
}
