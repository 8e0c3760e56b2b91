package limitpolicy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/glob"
	"github.com/cellserver/cellserver/internal/setting"
)

// MaxRules bounds each list (glob.MaxRules), and glob.MaxPatternLen each
// pattern: a list is compiled into one glob.Table, matched in one pass
// over the key whatever its number of rules, and the caps bound its
// compilation and the cost of a key whose path it has not cached.
const MaxRules = glob.MaxRules

// Errors of Parse.
var (
	// ErrRuleArity is returned for an override list whose words do not
	// come in groups of four (pattern burst rate period).
	ErrRuleArity = errors.New("expected groups of: pattern burst rate period")
	// ErrTooManyRules is returned for more than MaxRules rules.
	ErrTooManyRules = glob.ErrTooManyRules
	// ErrPatternTooLong is returned for a pattern longer than
	// glob.MaxPatternLen.
	ErrPatternTooLong = glob.ErrPatternTooLong
)

// Override is one limit-override rule: requests on keys matching Pattern
// take Burst, Rate and Period instead of the caller's.
//
// Per command family: Burst replaces CL.THROTTLE's and CL.THROTTLEALL's
// max_burst, TB.TAKE's and LB.ADD's capacity, and FW.INCR's, SW.INCR's and
// SL.ADD's limit; Rate replaces count_per_period, refill_tokens and
// leak_count (the window limiters have none and ignore it); Period
// replaces period, refill_period, leak_period and window. The quantity and
// TB.TAKE's INTERVAL stay the caller's.
type Override struct {
	Pattern string
	// Burst is 0..engine.MaxCount; Rate 1..engine.MaxCount; Period in
	// nanoseconds, 1 ms..engine.MaxPeriod.
	Burst, Rate, Period int64
}

// String is the rule as the setting writes it: pattern (quoted when it
// holds a space or quote), burst, rate, period (seconds, or ms when not
// whole).
func (o Override) String() string {
	return quote(o.Pattern) + " " + strconv.FormatInt(o.Burst, 10) + " " + strconv.FormatInt(o.Rate, 10) + " " + formatPeriod(o.Period)
}

func formatPeriod(ns int64) string {
	if ns%int64(time.Second) == 0 {
		return strconv.FormatInt(ns/int64(time.Second), 10)
	}
	return strconv.FormatInt(ns/int64(time.Millisecond), 10) + "ms"
}

// quote writes a pattern as ParseOverrides and ParseShadow read it back.
func quote(p string) string { return setting.Quote(p) }

// ParseOverrides reads limit-override's value: zero or more rules, each
// "pattern burst rate period" (words separated by spaces; a pattern with a
// space is quoted). The period is a duration as the limiter commands take
// it: whole seconds, or a number with a unit ms, s, m, h, d.
func ParseOverrides(v string) ([]Override, error) {
	words, err := setting.SplitLine(strings.TrimSpace(v))
	if err != nil {
		return nil, err
	}
	if len(words)%4 != 0 {
		return nil, ErrRuleArity
	}
	patterns := make([]string, 0, len(words)/4)
	for i := 0; i < len(words); i += 4 {
		patterns = append(patterns, words[i])
	}
	if err := glob.CheckRules(patterns); err != nil {
		return nil, err
	}
	var out []Override
	for i := 0; i < len(words); i += 4 {
		o := Override{Pattern: words[i]}
		var err error
		if o.Burst, err = count(words[i+1], "burst", 0); err == nil {
			if o.Rate, err = count(words[i+2], "rate", 1); err == nil {
				o.Period, err = period(words[i+3])
			}
		}
		if err != nil {
			return nil, fmt.Errorf("rule %d (%s): %w", i/4+1, quote(o.Pattern), err)
		}
		out = append(out, o)
	}
	return out, nil
}

func count(w, name string, least int64) (int64, error) {
	n, err := engine.ParseInt([]byte(w))
	switch {
	case err != nil:
		return 0, fmt.Errorf("%s %q: %w", name, w, err)
	case n < least || n > engine.MaxCount:
		return 0, fmt.Errorf("%s %d is not in %d..2^40", name, n, least)
	}
	return n, nil
}

func period(w string) (int64, error) {
	ns, err := engine.ParseDuration([]byte(w))
	switch {
	case err != nil:
		return 0, fmt.Errorf("period %q: %w", w, err)
	case ns < int64(time.Millisecond) || ns > engine.MaxPeriod:
		return 0, fmt.Errorf("period %q is not in 1ms..3660d", w)
	}
	return ns, nil
}

// ParseShadow reads limit-shadow's value: zero or more patterns separated
// by spaces (quoted when they hold one).
func ParseShadow(v string) ([]string, error) {
	words, err := setting.SplitLine(strings.TrimSpace(v))
	if err != nil {
		return nil, err
	}
	if err := glob.CheckRules(words); err != nil {
		return nil, err
	}
	return words, nil
}

// FormatOverrides writes rules as ParseOverrides reads them.
func FormatOverrides(rules []Override) string {
	s := make([]string, len(rules))
	for i, o := range rules {
		s[i] = o.String()
	}
	return strings.Join(s, " ")
}

// FormatShadow writes patterns as ParseShadow reads them.
func FormatShadow(patterns []string) string {
	s := make([]string, len(patterns))
	for i, p := range patterns {
		s[i] = quote(p)
	}
	return strings.Join(s, " ")
}

// rules is one immutable rule set, each list with its patterns compiled
// into one table.
type rules struct {
	overrides []Override
	shadow    []string
	otab      *glob.Table // the overrides' patterns
	stab      *glob.Table // shadow
}

// newRules compiles o and s, which a setter keeps as they are: a list
// longer than MaxRules (which Parse refuses) still works, at the cost of
// its compilation.
func newRules(o []Override, s []string, otab, stab *glob.Table) *rules {
	r := &rules{overrides: o, shadow: s, otab: otab, stab: stab}
	if otab == nil {
		patterns := make([]string, len(o))
		for i, x := range o {
			patterns[i] = x.Pattern
		}
		r.otab = glob.Compile(patterns)
	}
	if stab == nil {
		r.stab = glob.Compile(s)
	}
	return r
}

// Policy is a node's rule set and its counters. The zero Policy has no
// rules.
type Policy struct {
	cur atomic.Pointer[rules]
	mu  sync.Mutex // serialises the setters

	overridden atomic.Uint64 // requests whose parameters a rule replaced
	shadowed   atomic.Uint64 // requests sent as shadow
}

// SetOverrides replaces the override rules.
func (p *Policy) SetOverrides(o []Override) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.load()
	p.cur.Store(newRules(o, r.shadow, nil, r.stab))
}

// SetShadow replaces the shadow patterns.
func (p *Policy) SetShadow(s []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.load()
	p.cur.Store(newRules(r.overrides, s, r.otab, nil))
}

var empty rules

func (p *Policy) load() *rules {
	if r := p.cur.Load(); r != nil {
		return r
	}
	return &empty
}

// Overrides returns the override rules in force (not to be modified).
func (p *Policy) Overrides() []Override { return p.load().overrides }

// Shadow returns the shadow patterns in force (not to be modified).
func (p *Policy) Shadow() []string { return p.load().shadow }

// Match is what the rules say of one key.
type Match struct {
	// Override is the first override rule matching the key, or nil.
	Override *Override
	// Shadow is the first shadow pattern matching the key, or "" (with
	// ShadowOK false).
	Shadow   string
	ShadowOK bool
}

// Lookup returns the rules matching key.
func (p *Policy) Lookup(key []byte) Match {
	r := p.load()
	var m Match
	if i := r.otab.Match(key); i >= 0 {
		m.Override = &r.overrides[i]
	}
	if i := r.stab.Match(key); i >= 0 {
		m.Shadow, m.ShadowOK = r.shadow[i], true
	}
	return m
}

// Apply rewrites req, a request on key, by the rules: the first matching
// override replaces its parameters (see Override), a matching shadow
// pattern sets req.Shadow. A request the override makes invalid for its
// kind (a limit of 0 for a window limiter, a sliding log's limit above
// opt's maximum, a span beyond engine.MaxSpan) fails with that error,
// wrapped with the rule's pattern; req is then unchanged. With no rules
// Apply costs one atomic load; with rules, one pass over the key per list
// (glob.Table), whatever their number.
func (p *Policy) Apply(key []byte, req *engine.Request, opt engine.ParseOptions) error {
	r := p.cur.Load()
	if r == nil || (len(r.overrides) == 0 && len(r.shadow) == 0) {
		return nil
	}
	if i := r.otab.Match(key); i >= 0 {
		o := &r.overrides[i]
		next := *req
		next.Burst, next.Period = o.Burst, o.Period
		if req.Kind == engine.KindFixedWindow || req.Kind == engine.KindSlidingWindow || req.Kind == engine.KindSlidingLog {
			next.Rate = 0
		} else {
			next.Rate = o.Rate
		}
		err := next.Validate()
		if err == nil && req.Kind == engine.KindSlidingLog {
			max := opt.MaxLogLimit
			if max == 0 {
				max = engine.DefaultMaxLogLimit
			}
			if next.Burst > max {
				err = engine.ErrLogLimit
			}
		}
		if err != nil {
			return fmt.Errorf("limit-override %s: %w", quote(o.Pattern), err)
		}
		*req = next
		p.overridden.Add(1)
	}
	if r.stab.Match(key) >= 0 {
		req.Shadow = true
		p.shadowed.Add(1)
	}
	return nil
}

// Stats are a node's counts of requests the rules changed (on the node
// that received them).
type Stats struct {
	Overrides, Shadows int    // rules in force
	Overridden         uint64 // requests whose parameters were replaced
	ShadowRequests     uint64 // requests sent as shadow
}

// Stats returns the rule counts and counters.
func (p *Policy) Stats() Stats {
	r := p.load()
	return Stats{Overrides: len(r.overrides), Shadows: len(r.shadow), Overridden: p.overridden.Load(), ShadowRequests: p.shadowed.Load()}
}
