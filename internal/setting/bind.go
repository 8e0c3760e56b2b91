package setting

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
)

// LiveInt is the Live of the Table's Int or Bytes setting name, read with get
// and changed with set once CONFIG SET's value is parsed and in range
// (Spec.ParseLive, which words the refusal). It panics when the Table has
// no such setting.
func LiveInt(name string, get func() int64, set func(n int64) error) Live {
	spec := Must(name)
	return Live{Name: name, Get: func() string { return strconv.FormatInt(get(), 10) }, Set: func(v string) error {
		n, err := spec.ParseLive(v)
		if err != nil {
			return err
		}
		return set(n)
	}}
}

// LiveVar is LiveInt for a setting whose value is v itself.
func LiveVar(name string, v *atomic.Int64) Live {
	return LiveInt(name, v.Load, func(n int64) error { v.Store(n); return nil })
}

// LiveSeconds is LiveInt for a setting shown and set in seconds whose
// value v holds in nanoseconds.
func LiveSeconds(name string, v *atomic.Int64) Live {
	return LiveInt(name, func() int64 { return v.Load() / 1e9 }, func(n int64) error { v.Store(n * 1e9); return nil })
}

// Words returns a parser of the Enum setting name's CONFIG SET value: one
// of the Table's words (Spec.ParseWord, which words the refusal), then
// what parse makes of it. It panics when the Table has no such setting.
func Words[T any](name string, parse func(word string) (T, error)) func(string) (T, error) {
	spec := Must(name)
	return func(v string) (T, error) {
		w, err := spec.ParseWord(v)
		if err != nil {
			var zero T
			return zero, err
		}
		return parse(w)
	}
}

// LiveFunc is a setting shown by get and changed by set with the value
// parse reads (its error refuses the value, shown to the client).
func LiveFunc[T any](name string, get func() string, parse func(string) (T, error), set func(T)) Live {
	return Live{Name: name, Get: get, Set: func(v string) error {
		x, err := parse(v)
		if err != nil {
			return err
		}
		set(x)
		return nil
	}}
}

// LiveBool is a yes/no setting whose value is v (ParseYesNo's words).
func LiveBool(name string, v *atomic.Bool) Live {
	return LiveFunc(name, func() string { return yesNo(v.Load()) }, func(s string) (bool, error) {
		b, err := ParseYesNo(s)
		if err != nil {
			return false, errors.New("argument must be 'yes' or 'no'")
		}
		return b, nil
	}, v.Store)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// LiveFixed is a read-only setting whose value never changes.
func LiveFixed(name, value string) Live {
	return Live{Name: name, Get: func() string { return value }}
}

// ParseLogLevel maps Redis's log levels to slog: debug → Debug, verbose →
// Debug+2, notice → Info, warning → Warn.
func ParseLogLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "verbose":
		return slog.LevelDebug + 2, nil
	case "notice":
		return slog.LevelInfo, nil
	case "warning":
		return slog.LevelWarn, nil
	}
	return 0, fmt.Errorf("invalid log level %q (want debug, verbose, notice or warning)", s)
}

// LogLevelName is the Redis name of an slog level (see ParseLogLevel).
func LogLevelName(l slog.Level) string {
	switch {
	case l < slog.LevelDebug+2:
		return "debug"
	case l < slog.LevelInfo:
		return "verbose"
	case l < slog.LevelWarn:
		return "notice"
	}
	return "warning"
}
