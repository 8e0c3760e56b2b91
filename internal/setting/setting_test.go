package setting

import (
	"os"
	"testing"
	"time"
)

// TestDocsUpToDate fails when docs/configuration.md differs from what the
// settings table generates; regenerate with `go generate ./internal/setting`.
func TestDocsUpToDate(t *testing.T) {
	got, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatalf("read docs/configuration.md: %v (generate it with `go generate ./internal/setting`)", err)
	}
	if string(got) != string(Markdown()) {
		t.Errorf("docs/configuration.md is out of date with the settings table: run `go generate ./internal/setting`")
	}
}

func TestTable(t *testing.T) {
	seen := map[string]bool{}
	groups := map[string]bool{}
	for _, g := range Groups {
		groups[g] = true
	}
	for _, s := range Table {
		if seen[s.Name] {
			t.Errorf("setting %q listed twice", s.Name)
		}
		seen[s.Name] = true
		if !groups[s.Group] {
			t.Errorf("setting %q: group %q is not in Groups", s.Name, s.Group)
		}
		if (s.Kind == Int || s.Kind == Bytes || s.Kind == Duration) && s.Min >= s.Max {
			t.Errorf("setting %q: range %d..%d is empty or unset", s.Name, s.Min, s.Max)
		}
		if (s.Kind == Int || s.Kind == Bytes || s.Kind == Duration) && s.Default != "" {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("setting %q: %v", s.Name, r)
					}
				}()
				if err := s.CheckRange(s.DefaultInt()); err != nil {
					t.Errorf("setting %q: default: %v", s.Name, err)
				}
			}()
		}
		if s.Kind == Duration && s.Min < 1 {
			t.Errorf("setting %q: a duration's Min must be at least 1ns", s.Name)
		}
		if s.Kind == Enum && len(s.Words) == 0 {
			t.Errorf("setting %q: an enum without words", s.Name)
		}
	}
}

func TestCheckRange(t *testing.T) {
	tests := []struct {
		name string
		n    int64
		want string
	}{
		{"port", 70000, "port 70000 is not in 0..65535"},
		{"maxclients", 0, "maxclients 0 must be at least 1"},
		{"timeout", -1, "timeout -1 must not be negative"},
		{"proto-max-bulk-len", 1, "proto-max-bulk-len 1 is not in 1mb..1tb"},
		{"sl-max-limit", 0, "sl-max-limit 0 is not in 1..1099511627776"},
		{"port", 6379, ""},
		{"slowlog-log-slower-than", -5, ""},
	}
	for _, tt := range tests {
		err := Must(tt.name).CheckRange(tt.n)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("%s.CheckRange(%d) = %q, want %q", tt.name, tt.n, got, tt.want)
		}
	}
}

func TestParseLive(t *testing.T) {
	tests := []struct {
		name, v string
		want    int64
		err     string
	}{
		{"maxclients", "0", 0, "argument must be an integer of at least 1"},
		{"maxclients", "5", 5, ""},
		{"timeout", "2147483649", 0, "argument couldn't be parsed into an integer"},
		{"timeout", "2147483648", 1 << 31, ""},
		{"maxmemory", "100mb", 100 << 20, ""},
		{"maxmemory", "-1", 0, "argument must be a memory size (e.g. 100mb)"},
	}
	for _, tt := range tests {
		n, err := Must(tt.name).ParseLive(tt.v)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if n != tt.want || got != tt.err {
			t.Errorf("%s.ParseLive(%q) = %d, %q; want %d, %q", tt.name, tt.v, n, got, tt.want, tt.err)
		}
	}
}

func TestCheck(t *testing.T) {
	word := func(v string) any { return &v }
	dur := func(d time.Duration) any { return &d }
	u64 := func(n uint64) any { return &n }
	tests := []struct {
		name string
		dst  any
		want string
	}{
		{"appendfsync", word("everysec"), ""},
		{"appendfsync", word("sometimes"), `appendfsync: expected always, everysec or no, got "sometimes"`},
		{"loglevel", word("warning"), ""},
		{"loglevel", word("loud"), `loglevel: expected debug, verbose, notice or warning, got "loud"`},
		{"raft-heartbeat-timeout", dur(time.Millisecond), "raft-heartbeat-timeout 1ms must be at least 5ms"},
		{"raft-heartbeat-timeout", dur(time.Second), ""},
		{"raft-snapshot-threshold", u64(0), "raft-snapshot-threshold 0 must be at least 1"},
		{"raft-max-inflight", func() any { n := 0; return &n }(), "raft-max-inflight 0 must be at least 1"},
		{"shards", func() any { n := 2048; return &n }(), "shards 2048 is not in 0..1024"},
		{"bind", word("anything"), ""},
	}
	for _, tt := range tests {
		err := Must(tt.name).Check(tt.dst)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("%s.Check(%v) = %q, want %q", tt.name, tt.dst, got, tt.want)
		}
	}
}

func TestParseWord(t *testing.T) {
	tests := []struct {
		name, v, want, err string
	}{
		{"maxmemory-policy", "VOLATILE-TTL", "volatile-ttl", ""},
		{"maxmemory-policy", "allkeys-lru", "", `maxmemory-policy: expected noeviction or volatile-ttl, got "allkeys-lru"`},
		{"loglevel", "Notice", "notice", ""},
	}
	for _, tt := range tests {
		w, err := Must(tt.name).ParseWord(tt.v)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if w != tt.want || got != tt.err {
			t.Errorf("%s.ParseWord(%q) = %q, %q; want %q, %q", tt.name, tt.v, w, got, tt.want, tt.err)
		}
	}
}
