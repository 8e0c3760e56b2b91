package setting

import (
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
)

func TestLiveVar(t *testing.T) {
	var v atomic.Int64
	v.Store(5)
	st := LiveVar("transaction-max-commands", &v)
	if got := st.Get(); got != "5" {
		t.Errorf("Get = %q, want 5", got)
	}
	if err := st.Set("70"); err != nil || v.Load() != 70 {
		t.Errorf("Set(70) = %v, value %d; want nil, 70", err, v.Load())
	}
	// Out of range and not a number: the table's wording, nothing changed.
	for _, bad := range []string{"0", "x"} {
		err := st.Set(bad)
		if err == nil || err.Error() != Must("transaction-max-commands").LiveErr || v.Load() != 70 {
			t.Errorf("Set(%q) = %v, value %d; want the LiveErr and 70", bad, err, v.Load())
		}
	}
}

func TestLiveIntSetterError(t *testing.T) {
	refused := errors.New("no room")
	st := LiveInt("maxclients", func() int64 { return 10 }, func(int64) error { return refused })
	if err := st.Set("20"); err != refused {
		t.Errorf("Set = %v, want the setter's error", err)
	}
	if st := LiveFixed("databases", "1"); st.Get() != "1" || st.Set != nil {
		t.Errorf("LiveFixed: Get %q, Set %v; want 1 and read-only", st.Get(), st.Set != nil)
	}
}

func TestLogLevels(t *testing.T) {
	for _, name := range []string{"debug", "verbose", "notice", "warning"} {
		l, err := ParseLogLevel(name)
		if err != nil || LogLevelName(l) != name {
			t.Errorf("ParseLogLevel(%q) = %v, %v; its name %q", name, l, err, LogLevelName(l))
		}
	}
	if _, err := ParseLogLevel("loud"); err == nil {
		t.Error("ParseLogLevel(loud) = nil error, want one")
	}
	if got := LogLevelName(slog.LevelError); got != "warning" {
		t.Errorf("LogLevelName(Error) = %q, want warning", got)
	}
}

func TestLiveBoolAndFunc(t *testing.T) {
	var b atomic.Bool
	st := LiveBool("protected-mode", &b)
	if err := st.Set("YES"); err != nil || !b.Load() || st.Get() != "yes" {
		t.Errorf("Set(YES) = %v, value %v, Get %q; want nil, true, yes", err, b.Load(), st.Get())
	}
	if err := st.Set("maybe"); err == nil || err.Error() != "argument must be 'yes' or 'no'" || !b.Load() {
		t.Errorf("Set(maybe) = %v, value %v; want the yes/no refusal and true kept", err, b.Load())
	}
	got := ""
	fn := LiveFunc("x", func() string { return got }, func(v string) (int, error) {
		if v == "" {
			return 0, errors.New("empty")
		}
		return len(v), nil
	}, func(n int) { got = string(rune('0' + n)) })
	if err := fn.Set("abc"); err != nil || fn.Get() != "3" {
		t.Errorf("LiveFunc Set(abc) = %v, Get %q; want nil, 3", err, fn.Get())
	}
	if err := fn.Set(""); err == nil || fn.Get() != "3" {
		t.Errorf("LiveFunc Set(\"\") = %v, Get %q; want the parse error and 3 kept", err, fn.Get())
	}
}

func TestLiveSeconds(t *testing.T) {
	var v atomic.Int64
	v.Store(3e9)
	st := LiveSeconds("timeout", &v)
	if got := st.Get(); got != "3" {
		t.Errorf("Get = %q, want 3", got)
	}
	if err := st.Set("7"); err != nil || v.Load() != 7e9 {
		t.Errorf("Set(7) = %v, value %d; want nil, 7e9", err, v.Load())
	}
	if err := st.Set("-1"); err == nil || v.Load() != 7e9 {
		t.Errorf("Set(-1) = %v, value %d; want an error, 7e9", err, v.Load())
	}
}

func TestWords(t *testing.T) {
	parse := Words("loglevel", ParseLogLevel)
	if l, err := parse("WARNING"); err != nil || l != slog.LevelWarn {
		t.Errorf("parse(WARNING) = %v, %v; want Warn", l, err)
	}
	if _, err := parse("loud"); err == nil {
		t.Error("parse(loud) succeeded, want the table's refusal")
	}
}
