package keyclass

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cellserver/cellserver/internal/glob"
	"github.com/cellserver/cellserver/internal/setting"
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

// ParseRules reads "NAME PATTERN [NAME PATTERN ...]" (words separated by
// spaces and quoted as in the configuration file, setting.SplitLine; "" is
// no rules). A name is 1 to MaxNameLen letters, digits, '_',
// '-' or '.', not Other, and given once; a pattern is not empty.
func ParseRules(v string) (Rules, error) {
	f, err := setting.SplitLine(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRule, err)
	}
	if len(f)%2 != 0 {
		return nil, fmt.Errorf("%w: expected NAME PATTERN pairs, got %d words", ErrRule, len(f))
	}
	if err := checkCount(len(f) / 2); err != nil {
		return nil, err
	}
	var out Rules
	for i := 0; i < len(f); i += 2 {
		r := Rule{Name: f[i], Pattern: f[i+1]}
		if err := r.check(); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, out.checkNames()
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

// checkCount refuses more than MaxRules rules.
func checkCount(n int) error {
	if n > MaxRules {
		return fmt.Errorf("%w: too many rules: %d, at most %d", ErrRule, n, MaxRules)
	}
	return nil
}

func (rs Rules) checkNames() error {
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
	if err := checkCount(len(all)); err != nil {
		return err
	}
	if err := all.checkNames(); err != nil {
		return err
	}
	*rs = all
	return nil
}

// String writes the rules as ParseRules reads them.
func (rs Rules) String() string {
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(r.Name)
		b.WriteByte(' ')
		b.WriteString(setting.Quote(r.Pattern))
	}
	return b.String()
}

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
