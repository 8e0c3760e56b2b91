package resp

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cellserver/cellserver/internal/keyclass"
	"github.com/cellserver/cellserver/internal/serverstats"
)

// classLines returns INFO classes' class_* lines, joined by spaces.
func classLines(t *testing.T, ts *testServer) string {
	t.Helper()
	inf, err := ts.client(t, 2, "").Info(context.Background(), "classes").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(inf, "\r\n") {
		if strings.HasPrefix(l, "class_") || strings.HasPrefix(l, "metrics_class_") {
			out = append(out, l)
		}
	}
	return strings.Join(out, " ")
}

// TestClasses: decisions are counted by key class (rules first, then
// prefixes up to the limit, then other), shown by INFO classes, and
// CONFIG SET changes the classes live, keeping the counts of the classes
// it keeps.
func TestClasses(t *testing.T) {
	ts := startServer(t, func(c *Config) {
		c.MetricsClasses = keyclass.Rules{{Name: "vip", Pattern: "vip:*"}}
		c.MetricsClassLimit = 2
	})
	ctx := context.Background()
	c := ts.client(t, 2, "")
	throttle := func(keys ...string) {
		t.Helper()
		for _, k := range keys {
			// Burst 0, one per minute: the first call on a key is allowed,
			// the next ones limited.
			if err := c.Do(ctx, "CL.THROTTLE", k, "0", "1", "60").Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	throttle("vip:1", "user:1", "user:1", "user:1", "ip:1", "zz:1", "nocolon")
	// THROTTLEALL counts each of its keys with its own result: user:2
	// would allow, user:1 is limited (so the call is refused).
	if err := c.Do(ctx, "CL.THROTTLEALL", "user:2", "0", "1", "60", "1", "user:1", "0", "1", "60", "1").Err(); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		set  []string // CONFIG SET name value, before throttling keys
		keys []string
		want string
	}{
		{"start", nil, nil,
			"metrics_class_rules:1 metrics_class_limit:2 metrics_class_prefixes:2 class_vip:kind=rule,allowed=1,limited=0 " +
				"class_user:kind=prefix,allowed=2,limited=3 class_ip:kind=prefix,allowed=1,limited=0 class_other:kind=other,allowed=2,limited=0"},
		{"rule added", []string{"metrics-class", "vip vip:* zz zz:*"}, []string{"zz:1", "zz:2"},
			"metrics_class_rules:2 metrics_class_limit:2 metrics_class_prefixes:2 class_vip:kind=rule,allowed=1,limited=0 class_zz:kind=rule,allowed=1,limited=1 " +
				"class_user:kind=prefix,allowed=2,limited=3 class_ip:kind=prefix,allowed=1,limited=0 class_other:kind=other,allowed=2,limited=0"},
		{"limit lowered", []string{"metrics-class-limit", "1"}, []string{"ip:2"},
			"metrics_class_rules:2 metrics_class_limit:1 metrics_class_prefixes:1 class_vip:kind=rule,allowed=1,limited=0 class_zz:kind=rule,allowed=1,limited=1 " +
				"class_user:kind=prefix,allowed=2,limited=3 class_other:kind=other,allowed=3,limited=0"},
		{"rules removed", []string{"metrics-class", ""}, []string{"vip:2"},
			"metrics_class_rules:0 metrics_class_limit:1 metrics_class_prefixes:1 class_user:kind=prefix,allowed=2,limited=3 class_other:kind=other,allowed=4,limited=0"},
		{"off", []string{"metrics-class-limit", "0"}, []string{"user:9"},
			"metrics_class_rules:0 metrics_class_limit:0 metrics_class_prefixes:0"},
		{"on again", []string{"metrics-class-limit", "5"}, []string{"a:1"},
			"metrics_class_rules:0 metrics_class_limit:5 metrics_class_prefixes:1 class_a:kind=prefix,allowed=1,limited=0 class_other:kind=other,allowed=0,limited=0"},
	}
	for _, st := range steps {
		if st.set != nil {
			if err := c.ConfigSet(ctx, st.set[0], st.set[1]).Err(); err != nil {
				t.Fatalf("%s: CONFIG SET %q: %v", st.name, st.set, err)
			}
			if got, _ := c.ConfigGet(ctx, st.set[0]).Result(); got[st.set[0]] != st.set[1] {
				t.Errorf("%s: CONFIG GET %s = %q, want %q", st.name, st.set[0], got[st.set[0]], st.set[1])
			}
		}
		throttle(st.keys...)
		if got := classLines(t, ts); got != st.want {
			t.Errorf("%s: INFO classes =\n  %s\nwant\n  %s", st.name, got, st.want)
		}
	}
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if got, want := classLines(t, ts), "metrics_class_rules:0 metrics_class_limit:5 metrics_class_prefixes:1 class_a:kind=prefix,allowed=0,limited=0 class_other:kind=other,allowed=0,limited=0"; got != want {
		t.Errorf("after CONFIG RESETSTAT: %s, want %s", got, want)
	}
	if got := ts.srv.Stats().Classes; len(got) != 2 || got[0].Name != "a" {
		t.Errorf("Stats().Classes = %+v, want a and other", got)
	}
}

// TestClassesBadSettings: a bad value is refused with a clear error and
// changes nothing.
func TestClassesBadSettings(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MetricsClasses = keyclass.Rules{{Name: "vip", Pattern: "vip:*"}} })
	ctx := context.Background()
	c := ts.client(t, 2, "")
	for _, tt := range []struct{ name, value, want string }{
		{"metrics-class", "lonely", "NAME PATTERN pairs"},
		{"metrics-class", "other o:*", "reserved"},
		{"metrics-class", "a a:* a b:*", "given twice"},
		{"metrics-class", "bad:name x", "class name"},
		{"metrics-class-limit", "-1", "from 0 to 10000"},
		{"metrics-class-limit", "10001", "from 0 to 10000"},
		{"metrics-class-limit", "many", "from 0 to 10000"},
	} {
		err := c.ConfigSet(ctx, tt.name, tt.value).Err()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("CONFIG SET %s %q = %v, want an error containing %q", tt.name, tt.value, err, tt.want)
		}
	}
	got, _ := c.ConfigGet(ctx, "metrics-class*").Result()
	if got["metrics-class"] != "vip vip:*" || got["metrics-class-limit"] != "100" {
		t.Errorf("after refused changes: %v, want metrics-class vip vip:* and metrics-class-limit 100", got)
	}
}

// TestInfoSections: a section wired beside the server (Config.InfoSections)
// is printed by INFO with its name and by INFO all, not by INFO alone.
func TestInfoSections(t *testing.T) {
	var calls atomic.Int32
	ts := startServer(t, func(c *Config) {
		c.InfoSections = []serverstats.Section{{Name: "rls", Fields: func() []serverstats.Field {
			calls.Add(1)
			return []serverstats.Field{{Name: "rls_requests", Value: "7"}}
		}}}
	})
	ctx := context.Background()
	c := ts.client(t, 2, "")
	for _, tt := range []struct {
		args []any
		want bool
	}{{[]any{"INFO"}, false}, {[]any{"INFO", "rls"}, true}, {[]any{"INFO", "all"}, true}, {[]any{"INFO", "classes"}, false}} {
		got, err := c.Do(ctx, tt.args...).Text()
		if err != nil {
			t.Fatal(err)
		}
		if has := strings.Contains(got, "# Rls\r\nrls_requests:7\r\n"); has != tt.want {
			t.Errorf("%v shows the rls section: %v, want %v\n%s", tt.args, has, tt.want, got)
		}
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("Fields called %d times, want 2", n)
	}
}
