package keyclass

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cellserver/cellserver/internal/glob"
	"github.com/cellserver/cellserver/internal/rules"
)

// Other is the class of every key no rule and no prefix class takes.
const Other = "other"

// MaxNameLen is the longest class name, a rule's or a prefix's, in bytes.
const MaxNameLen = 64

// MaxRules is the most rules (glob.MaxRules): the rules are compiled into
// one glob.Table, matched in one pass over the key whatever their number,
// and each names a class, so the cap bounds both the table and the label
// values (see MaxClasses).
const MaxRules = glob.MaxRules

// maxPatternLen bounds a rule's pattern, in bytes.
const maxPatternLen = glob.MaxPatternLen

// ErrRule is wrapped by every error about a rule.
var ErrRule = errors.New("keyclass: bad rule")

// Rule is one configured class: the keys matching Pattern (a Redis glob)
// count under Name.
type Rule struct {
	Name, Pattern string
}

// Rules are the configured classes, in the order they are tried (the first
// match wins). As a configuration field, each Set adds to them (the
// directive is repeatable); CONFIG SET replaces them whole (ParseRules).
type Rules []Rule

// ruleSyntax is metrics-class's: NAME PATTERN, repeated.
var ruleSyntax = rules.Syntax[Rule]{
	Pattern: func(r Rule) string { return r.Pattern },
	Read: func(w []string, _ int) (Rule, int, error) {
		if len(w) < 2 {
			return Rule{}, 0, fmt.Errorf("%w: expected NAME PATTERN pairs; class %q has no pattern", ErrRule, w[0])
		}
		r := Rule{Name: w[0], Pattern: w[1]}
		return r, 2, r.check()
	},
	Append: func(b []byte, r Rule) []byte {
		return append(append(append(b, r.Name...), ' '), rules.QuotePattern(r.Pattern)...)
	},
	Check: checkNames,
	Wrap:  func(err error) error { return fmt.Errorf("%w: %w", ErrRule, err) },
}

// ParseRules reads "NAME PATTERN [NAME PATTERN ...]" (words separated by
// spaces and quoted as in the configuration file, setting.SplitLine; "" is
// no rules). A name is 1 to MaxNameLen letters, digits, '_',
// '-' or '.', not Other, and given once; a pattern is not empty.
func ParseRules(v string) (Rules, error) {
	f, err := ruleSyntax.Parse(v)
	if err != nil {
		return nil, err
	}
	return Rules(f), nil
}

func (r Rule) check() error {
	switch {
	case !validRuleName(r.Name):
		return fmt.Errorf("%w: class name %q: 1 to %d letters, digits, '_', '-' or '.'", ErrRule, r.Name, MaxNameLen)
	case r.Name == Other:
		return fmt.Errorf("%w: class name %q is reserved (keys no class takes)", ErrRule, Other)
	case len(r.Pattern) > maxPatternLen:
		return fmt.Errorf("%w: class %s: pattern longer than %d bytes", ErrRule, r.Name, maxPatternLen)
	}
	return nil
}

func checkNames(rs []Rule) error {
	seen := make(map[string]bool, len(rs))
	for _, r := range rs {
		if seen[r.Name] {
			return fmt.Errorf("%w: class %s given twice", ErrRule, r.Name)
		}
		seen[r.Name] = true
	}
	return nil
}

// Set adds the rules of v to rs (a configuration file line or a flag);
// "" removes every rule.
func (rs *Rules) Set(v string) error {
	if strings.TrimSpace(v) == "" {
		*rs = nil
		return nil
	}
	add, err := ParseRules(v)
	if err != nil {
		return err
	}
	all := append(append(Rules(nil), *rs...), add...)
	if err := ruleSyntax.Validate(all); err != nil {
		return err
	}
	*rs = all
	return nil
}

// String writes the rules as ParseRules reads them.
func (rs Rules) String() string { return ruleSyntax.Format(rs) }

func validRuleName(s string) bool {
	if s == "" || len(s) > MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// validPrefix reports whether a key prefix may name a class: 1 to
// MaxNameLen bytes of printable ASCII other than space, ',', '=', '"' and
// '\' (so that it is a Prometheus label value and an INFO field as it is).
func validPrefix(p []byte) bool {
	if len(p) == 0 || len(p) > MaxNameLen {
		return false
	}
	for _, c := range p {
		if c <= ' ' || c > '~' || c == ',' || c == '=' || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
