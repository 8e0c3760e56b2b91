package region

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cellserver/cellserver/internal/rules"
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
func (r Rule) String() string { return string(appendRule(nil, r)) }

func appendRule(b []byte, r Rule) []byte {
	b = append(append(append(b, rules.QuotePattern(r.Pattern)...), ' '), r.Mode.String()...)
	if r.Mode == ModeGlobal {
		b = append(append(b, ' '), r.Home...)
	}
	return b
}

// Policy is an ordered list of rules: a key is decided by the first rule
// whose pattern matches it, and is ModeLocal when none does. The rules are
// one rules.Table (internal/rules: the parse loop, caps, formatter and
// compiled first-match lookup shared with limit-override, limit-shadow and
// metrics-class), so a key is matched against every rule in one pass over
// the key. A Policy is immutable once built and safe for concurrent use;
// the zero Policy has no rules.
type Policy struct {
	rules []Rule // table's rules, in order (not to be modified)
	table *rules.Table[Rule]
}

// errPolicySyntax is wrapped by every ParsePolicy error.
var errPolicySyntax = errors.New("region-policy: expected PATTERN local|split|async|global HOME, repeated")

// policySyntax is region-policy's: PATTERN MODE, or PATTERN global HOME,
// repeated.
var policySyntax = rules.Syntax[Rule]{
	Pattern: func(r Rule) string { return r.Pattern },
	Read:    readRule,
	Append:  appendRule,
	Wrap:    func(err error) error { return fmt.Errorf("region-policy: %w", err) },
}

func readRule(w []string, _ int) (Rule, int, error) {
	if len(w) < 2 {
		return Rule{}, 0, fmt.Errorf("%w: pattern %q has no mode", errPolicySyntax, w[0])
	}
	m, ok := ParseMode(w[1])
	if !ok {
		return Rule{}, 0, fmt.Errorf("%w: unknown mode %q", errPolicySyntax, w[1])
	}
	r := Rule{Pattern: w[0], Mode: m}
	if m != ModeGlobal {
		return r, 2, nil
	}
	if len(w) < 3 {
		return Rule{}, 0, fmt.Errorf("%w: global rule %q names no home region", errPolicySyntax, r.Pattern)
	}
	r.Home = w[2]
	return r, 3, nil
}

// ParsePolicy reads rules from words (a region-policy value split into
// words, quotes removed): PATTERN MODE, or PATTERN global HOME, repeated.
// Zero words give the empty policy (every key local). At most
// glob.MaxRules rules, of patterns of at most glob.MaxPatternLen bytes.
func ParsePolicy(words []string) (*Policy, error) {
	rs, err := policySyntax.ParseWords(words)
	if err != nil {
		return nil, err
	}
	return &Policy{rules: rs, table: policySyntax.Compile(rs)}, nil
}

// Rules returns a copy of the rules, in order.
func (p *Policy) Rules() []Rule { return append([]Rule(nil), p.table.Rules()...) }

// Len is the number of rules.
func (p *Policy) Len() int { return p.table.Len() }

// String writes the policy as one region-policy value (CONFIG GET).
func (p *Policy) String() string { return policySyntax.Format(p.table.Rules()) }

// Match returns the rule deciding key: the first whose pattern matches, or
// a ModeLocal rule when none does.
func (p *Policy) Match(key []byte) Rule {
	if r := p.table.Lookup(key); r != nil {
		return *r
	}
	return Rule{Mode: ModeLocal}
}
