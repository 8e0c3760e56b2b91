package setting

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Kind is how a setting's value is written and parsed.
type Kind int

const (
	String   Kind = iota // any text
	Secret               // any text, never shown (a password)
	Int                  // a decimal integer in Min..Max
	Bytes                // a memory size (512mb, 1gb) in Min..Max; see ParseBytes
	YesNo                // yes or no (also true/false, 1/0)
	Enum                 // one of Words, any letter case
	Duration             // a positive Go duration (500ms, 3s) in Min..Max nanoseconds
)

// Unbounded ends of a range.
const (
	NoMin int64 = math.MinInt64
	NoMax int64 = math.MaxInt64
)

// Spec describes one setting.
type Spec struct {
	Name string // as in redis.conf and as a --flag
	Kind Kind
	// Min and Max bound an Int, Bytes or Duration value (a Duration's in
	// nanoseconds; NoMin, NoMax: unbounded). Every such row sets both.
	Min, Max int64
	// LiveMax, when not 0, is CONFIG SET's tighter upper bound (a number
	// of seconds the server holds as nanoseconds).
	LiveMax int64
	Words   []string // Enum's words
	Default string   // the default, as written in a configuration file
	// Live settings may be changed by CONFIG SET.
	Live bool
	// Repeatable settings may be given on several lines of a
	// configuration file (or several flags): the values add up, joined by
	// a space, instead of the last one winning.
	Repeatable bool
	// LiveErr is the reason CONFIG SET gives for any bad value (Redis's
	// words); empty: the parser's own error.
	LiveErr string
	Group   string // the docs' section
	Help    string
	// FileOf, on a setting whose value is a file's path, names the Secret
	// setting the file holds (requirepass-file holds requirepass): the
	// server reads the secret from the file at start, so that it never
	// stands on a command line. A Repeatable one is "NAME PATH" pairs, each
	// file holding NAME's part of the secret setting.
	FileOf string
}

// ErrNotYesNo is returned (wrapped) for a yes/no value that is neither.
var ErrNotYesNo = errors.New("expected yes or no")

// Lookup returns the setting named name, or nil.
func Lookup(name string) *Spec {
	for i := range Table {
		if Table[i].Name == name {
			return &Table[i]
		}
	}
	return nil
}

// Must returns the setting named name; it panics if there is none.
func Must(name string) *Spec {
	s := Lookup(name)
	if s == nil {
		panic("setting: no setting " + strconv.Quote(name))
	}
	return s
}

// ParseInt reads an Int or Bytes value, without its range (see CheckRange).
func (s *Spec) ParseInt(v string) (int64, error) {
	if s.Kind == Bytes {
		return ParseBytes(v)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not an integer: %q", v)
	}
	return n, nil
}

// DefaultInt returns an Int's or Bytes' default, or a Duration's in
// nanoseconds; it panics on a default that does not parse, which
// TestTable rules out.
func (s *Spec) DefaultInt() int64 {
	var n int64
	var err error
	if s.Kind == Duration {
		var d time.Duration
		d, err = ParseDuration(s.Default)
		n = int64(d)
	} else {
		n, err = s.ParseInt(s.Default)
	}
	if err != nil {
		panic("setting: default of " + s.Name + ": " + err.Error())
	}
	return n
}

// CheckRange reports whether n is in the setting's range, in the words
// every range error uses: "port 70000 is not in 0..65535", "maxclients 0
// must be at least 1", "timeout -1 must not be negative".
func (s *Spec) CheckRange(n int64) error {
	v := strconv.FormatInt(n, 10)
	if s.Kind == Duration {
		v = time.Duration(n).String()
	}
	switch {
	case n >= s.Min && n <= s.Max:
		return nil
	case s.Max != NoMax:
		return fmt.Errorf("%s %s is not in %s..%s", s.Name, v, s.format(s.Min), s.format(s.Max))
	case s.Min == 0:
		return fmt.Errorf("%s %s must not be negative", s.Name, v)
	}
	return fmt.Errorf("%s %s must be at least %s", s.Name, v, s.format(s.Min))
}

func (s *Spec) format(n int64) string {
	switch s.Kind {
	case Bytes:
		return FormatBytes(n)
	case Duration:
		return time.Duration(n).String()
	}
	return strconv.FormatInt(n, 10)
}

// ParseLive reads an Int or Bytes value given to CONFIG SET: parsed and in
// range (and at most LiveMax), or LiveErr.
func (s *Spec) ParseLive(v string) (int64, error) {
	n, err := s.ParseInt(v)
	if err == nil {
		err = s.CheckRange(n)
	}
	if err == nil && s.LiveMax != 0 && n > s.LiveMax {
		err = fmt.Errorf("%s %d is more than %d", s.Name, n, s.LiveMax)
	}
	if err != nil && s.LiveErr != "" {
		return 0, errors.New(s.LiveErr)
	}
	return n, err
}

// ParseYesNo reads a yes/no value: yes or no, also true/false and 1/0, in
// any letter case.
func ParseYesNo(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "yes", "true", "1":
		return true, nil
	case "no", "false", "0":
		return false, nil
	}
	return false, fmt.Errorf("%w, got %q", ErrNotYesNo, v)
}

// CheckWord reports whether v is one of an Enum's words (exactly: Set and
// ParseWord store them in lower case).
func (s *Spec) CheckWord(v string) error {
	for _, w := range s.Words {
		if v == w {
			return nil
		}
	}
	return fmt.Errorf("%s: expected %s, got %q", s.Name, orList(s.Words), v)
}

// ParseWord reads an Enum value given to CONFIG SET: one of Words in any
// letter case, returned in lower case, or LiveErr.
func (s *Spec) ParseWord(v string) (string, error) {
	w := strings.ToLower(v)
	if err := s.CheckWord(w); err != nil {
		if s.LiveErr != "" {
			return "", errors.New(s.LiveErr)
		}
		return "", err
	}
	return w, nil
}

func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// ParseDuration reads a Duration value.
func ParseDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("not a positive duration (e.g. 500ms): %q", v)
	}
	return d, nil
}

// Set parses v into dst, a pointer to the setting's field: *string,
// *bool, *int, *int64, *uint64, *time.Duration, or a type with its own
// Set(string) error. Ranges are not checked
// here (see Check): a Config may be built in code as well as parsed. An
// Enum is stored in lower case.
func (s *Spec) Set(dst any, v string) error {
	switch p := dst.(type) {
	case *string:
		if s.Kind == Enum {
			v = strings.ToLower(v)
		}
		*p = v
	case *bool:
		b, err := ParseYesNo(v)
		if err != nil {
			return err
		}
		*p = b
	case *int:
		n, err := s.ParseInt(v)
		if err != nil {
			return err
		}
		if int64(int(n)) != n {
			return fmt.Errorf("not an integer: %q", v)
		}
		*p = int(n)
	case *int64:
		n, err := s.ParseInt(v)
		if err != nil {
			return err
		}
		*p = n
	case *uint64:
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer: %q", v)
		}
		*p = n
	case *time.Duration:
		d, err := ParseDuration(v)
		if err != nil {
			return err
		}
		*p = d
	case interface{ Set(string) error }: // a field with its own syntax (save)
		return p.Set(v)
	default:
		panic(fmt.Sprintf("setting %s: unsupported field type %T", s.Name, dst))
	}
	return nil
}

// Check reports whether the field dst points to holds a valid value: an
// Int, Bytes or Duration in the setting's range, an Enum one of its words.
// Other kinds are always valid.
func (s *Spec) Check(dst any) error {
	switch p := dst.(type) {
	case *int:
		return s.CheckRange(int64(*p))
	case *int64:
		if s.Kind == Int || s.Kind == Bytes {
			return s.CheckRange(*p)
		}
	case *uint64:
		if *p > math.MaxInt64 {
			return s.CheckRange(math.MaxInt64)
		}
		return s.CheckRange(int64(*p))
	case *time.Duration:
		return s.CheckRange(int64(*p))
	case *string:
		if s.Kind == Enum {
			return s.CheckWord(*p)
		}
	}
	return nil
}

// ParseBytes reads a memory size as redis.conf writes them: a number of
// bytes with an optional unit, 1k = 1000, 1kb = 1024, 1m = 10^6,
// 1mb = 2^20, 1g = 10^9, 1gb = 2^30 (any letter case).
func ParseBytes(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mul := int64(1)
	for _, u := range []struct {
		suffix string
		mul    int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"b", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mul = strings.TrimSuffix(t, u.suffix), u.mul
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mul {
		return 0, fmt.Errorf("invalid memory size %q (e.g. 100mb, 1gb)", s)
	}
	return n * mul, nil
}

// FormatBytes writes n with the largest binary unit that divides it
// (1048576 → 1mb, 1<<40 → 1tb).
func FormatBytes(n int64) string {
	for _, u := range []struct {
		suffix string
		mul    int64
	}{{"tb", 1 << 40}, {"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10}} {
		if n != 0 && n%u.mul == 0 {
			return strconv.FormatInt(n/u.mul, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
