package rules

import (
	"strings"
	"sync/atomic"

	"github.com/cellserver/cellserver/internal/glob"
	"github.com/cellserver/cellserver/internal/setting"
)

// Syntax is how one setting writes its rules, of type R. Its functions
// must be set, except Check and Wrap.
type Syntax[R any] struct {
	// Pattern returns a rule's glob pattern.
	Pattern func(R) string
	// Read reads the rule at the front of words (never empty) and returns
	// it with the number of words it took (at least 1). n is the rule's
	// number, from 1, for its errors, which Read words in full (they are
	// returned as they are).
	Read func(words []string, n int) (r R, took int, err error)
	// Append appends r as Read reads it back; patterns go through
	// QuotePattern.
	Append func(b []byte, r R) []byte
	// Check, when set, checks a whole list once its rules are read and
	// within the caps (a name given twice).
	Check func([]R) error
	// Wrap, when set, words the errors of the parse loop itself — the
	// value's quoting and the caps (glob.CheckRules) — for the setting.
	Wrap func(error) error
}

// QuotePattern writes a pattern as Parse reads it back: as it is, or
// double-quoted when it is empty or holds a space, a quote or a byte that
// is not printable ASCII (setting.Quote).
func QuotePattern(p string) string { return setting.Quote(p) }

// Parse reads a setting's value: words separated by spaces, quoted as in
// the configuration file (setting.SplitLine), read rule after rule by
// s.Read. "" (or only spaces) is no rules.
func (s *Syntax[R]) Parse(v string) ([]R, error) {
	words, err := setting.SplitLine(strings.TrimSpace(v))
	if err != nil {
		return nil, s.wrap(err)
	}
	return s.ParseWords(words)
}

// ParseWords is Parse of a value already split into words.
func (s *Syntax[R]) ParseWords(words []string) ([]R, error) {
	var out []R
	for i, n := 0, 1; i < len(words); n++ {
		r, took, err := s.Read(words[i:], n)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
		i += max(took, 1)
	}
	if err := s.Validate(out); err != nil {
		return nil, err
	}
	return out, nil
}

// Validate checks a whole list: the caps (glob.MaxRules rules,
// glob.MaxPatternLen bytes a pattern), then s.Check. Parse calls it; a
// setting whose lines add up (a repeated directive) calls it on the sum.
func (s *Syntax[R]) Validate(rs []R) error {
	patterns := make([]string, len(rs))
	for i, r := range rs {
		patterns[i] = s.Pattern(r)
	}
	if err := glob.CheckRules(patterns); err != nil {
		return s.wrap(err)
	}
	if s.Check != nil {
		return s.Check(rs)
	}
	return nil
}

func (s *Syntax[R]) wrap(err error) error {
	if s.Wrap != nil {
		return s.Wrap(err)
	}
	return err
}

// Format writes rs as Parse reads them back: each rule by s.Append,
// separated by one space ("" for none). It is the value CONFIG GET,
// CONFIG REWRITE and a replicated setting hold.
func (s *Syntax[R]) Format(rs []R) string {
	var b []byte
	for i, r := range rs {
		if i > 0 {
			b = append(b, ' ')
		}
		b = s.Append(b, r)
	}
	return string(b)
}

// Table is an ordered list of rules with their patterns compiled into one
// glob.Table. It is immutable and safe for concurrent use; a nil Table has
// no rules.
type Table[R any] struct {
	rules []R
	match *glob.Table
}

// Compile makes the table of rs, which it keeps (not to be modified
// after). It checks no cap: a list longer than glob.MaxRules, which Parse
// refuses, still works, at the cost of its compilation.
func (s *Syntax[R]) Compile(rs []R) *Table[R] {
	patterns := make([]string, len(rs))
	for i, r := range rs {
		patterns[i] = s.Pattern(r)
	}
	return &Table[R]{rules: rs, match: glob.Compile(patterns)}
}

// Rules returns the rules in order (not to be modified).
func (t *Table[R]) Rules() []R {
	if t == nil {
		return nil
	}
	return t.rules
}

// Len returns the number of rules.
func (t *Table[R]) Len() int {
	if t == nil {
		return 0
	}
	return len(t.rules)
}

// Index returns the index of the first rule whose pattern matches key, or
// -1. It does not allocate once the key's path is cached (glob.Table).
func (t *Table[R]) Index(key []byte) int {
	if t == nil {
		return -1
	}
	return t.match.Match(key)
}

// Lookup returns the first rule whose pattern matches key (not to be
// modified), or nil.
func (t *Table[R]) Lookup(key []byte) *R {
	if i := t.Index(key); i >= 0 {
		return &t.rules[i]
	}
	return nil
}

// Live is the table in force for one setting, replaced whole by Store
// (CONFIG SET, a replicated setting): a reader loads it with one atomic
// load and sees either the old table or the new, never a mix. The zero
// Live has no rules (Load returns nil, which is an empty Table).
type Live[R any] struct {
	cur atomic.Pointer[Table[R]]
}

// Load returns the table in force (nil: no rules).
func (l *Live[R]) Load() *Table[R] { return l.cur.Load() }

// Store puts t in force for the lookups that start from now on.
func (l *Live[R]) Store(t *Table[R]) { l.cur.Store(t) }
