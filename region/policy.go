package region

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cellserver/cellserver/internal/glob"
	"github.com/cellserver/cellserver/internal/setting"
)

// Mode is how the regions share one key's limit.
type Mode uint8

// The modes.
const (
	// ModeLocal: each region limits the key alone (no region configured
	// behaves so for every key).
	ModeLocal Mode = iota
	// ModeSplit: each region enforces its share of the key's limit
	// (region-weight), so that the regions together never exceed it.
	ModeSplit
	// ModeGlobal: the key is decided in its home region only; the others
	// forward each request there.
	ModeGlobal
	// ModeAsync: each region decides at once with what it knows and ships
	// what it consumed to every peer every sync interval, where it is
	// applied as forced consumption, exactly once.
	ModeAsync
)

var modeNames = [...]string{"local", "split", "global", "async"}

// String returns the mode's configuration word.
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// ParseMode returns the mode named s (any letter case).
func ParseMode(s string) (Mode, bool) {
	for i, n := range modeNames {
		if strings.EqualFold(s, n) {
			return Mode(i), true
		}
	}
	return 0, false
}

// Rule is one region-policy line: keys matching Pattern (a Redis glob) are
// decided in Mode; Home is the deciding region of a ModeGlobal rule.
type Rule struct {
	Pattern string
	Mode    Mode
	Home    string
}

// String writes r as a region-policy value: "PATTERN MODE [HOME]", the
// pattern quoted when it holds a space, a quote or is empty.
func (r Rule) String() string {
	s := quote(r.Pattern) + " " + r.Mode.String()
	if r.Mode == ModeGlobal {
		s += " " + r.Home
	}
	return s
}

// quote writes a pattern as ParsePolicy's caller reads it back (the
// configuration file's quoting, setting.SplitLine).
func quote(s string) string { return setting.Quote(s) }

// Policy is an ordered list of rules: a key is decided by the first rule
// whose pattern matches it, and is ModeLocal when none does. The patterns
// are compiled into one glob.Table, so a key is matched against every rule
// in one pass over the key. A Policy is immutable once built and safe for
// concurrent use; the zero Policy has no rules.
type Policy struct {
	rules []Rule
	table *glob.Table // the rules' patterns
}

// errPolicySyntax is wrapped by every ParsePolicy error.
var errPolicySyntax = errors.New("region-policy: expected PATTERN local|split|async|global HOME, repeated")

// ParsePolicy reads rules from words (a region-policy value split into
// words, quotes removed): PATTERN MODE, or PATTERN global HOME, repeated.
// Zero words give the empty policy (every key local). At most
// glob.MaxRules rules, of patterns of at most glob.MaxPatternLen bytes.
func ParsePolicy(words []string) (*Policy, error) {
	p := &Policy{}
	for i := 0; i < len(words); {
		if i+1 >= len(words) {
			return nil, fmt.Errorf("%w: pattern %q has no mode", errPolicySyntax, words[i])
		}
		m, ok := ParseMode(words[i+1])
		if !ok {
			return nil, fmt.Errorf("%w: unknown mode %q", errPolicySyntax, words[i+1])
		}
		r := Rule{Pattern: words[i], Mode: m}
		i += 2
		if m == ModeGlobal {
			if i >= len(words) {
				return nil, fmt.Errorf("%w: global rule %q names no home region", errPolicySyntax, r.Pattern)
			}
			r.Home = words[i]
			i++
		}
		p.rules = append(p.rules, r)
	}
	patterns := make([]string, len(p.rules))
	for i, r := range p.rules {
		patterns[i] = r.Pattern
	}
	if err := glob.CheckRules(patterns); err != nil {
		return nil, fmt.Errorf("region-policy: %w", err)
	}
	p.table = glob.Compile(patterns)
	return p, nil
}

// Rules returns a copy of the rules, in order.
func (p *Policy) Rules() []Rule { return append([]Rule(nil), p.rules...) }

// Len is the number of rules.
func (p *Policy) Len() int { return len(p.rules) }

// String writes the policy as one region-policy value (CONFIG GET).
func (p *Policy) String() string {
	s := make([]string, len(p.rules))
	for i, r := range p.rules {
		s[i] = r.String()
	}
	return strings.Join(s, " ")
}

// Match returns the rule deciding key: the first whose pattern matches, or
// a ModeLocal rule when none does.
func (p *Policy) Match(key []byte) Rule {
	if i := p.table.Match(key); i >= 0 {
		return p.rules[i]
	}
	return Rule{Mode: ModeLocal}
}
