package rls

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"gopkg.in/yaml.v3"

	"github.com/cellserver/cellserver/engine"
)

// ErrConfig is wrapped by every error about a configuration file: bad YAML,
// an unknown field, an invalid unit, a duplicate domain or descriptor. The
// message names the file.
var ErrConfig = errors.New("rls: bad configuration")

// Algorithm is the limiter a rule runs, chosen by the rate_limit block's
// `algorithm` extension field.
type Algorithm uint8

// The algorithms a rule may choose.
const (
	// GCRA, the default: requests_per_unit per unit on average, at most
	// `burst` (default requests_per_unit) at once; CL.THROTTLE's limiter.
	GCRA Algorithm = iota
	// SlidingWindow: at most requests_per_unit in any window of one unit,
	// estimated from the previous and current windows (SW.INCR).
	SlidingWindow
	// FixedWindow: at most requests_per_unit per window aligned to the Unix
	// epoch, envoyproxy/ratelimit's own algorithm (FW.INCR).
	FixedWindow
)

var algorithmNames = [...]string{GCRA: "gcra", SlidingWindow: "sliding-window", FixedWindow: "fixed-window"}

// String returns the name used in configuration files and in keys.
func (a Algorithm) String() string {
	if int(a) < len(algorithmNames) {
		return algorithmNames[a]
	}
	return "unknown"
}

func (a Algorithm) kind() engine.Kind {
	switch a {
	case SlidingWindow:
		return engine.KindSlidingWindow
	case FixedWindow:
		return engine.KindFixedWindow
	}
	return engine.KindGCRA
}

// unitSeconds is each unit's length in seconds, as envoyproxy/ratelimit
// counts them (a month is 30 days, a year 365).
var unitSeconds = map[pb.RateLimitResponse_RateLimit_Unit]int64{
	pb.RateLimitResponse_RateLimit_SECOND: 1,
	pb.RateLimitResponse_RateLimit_MINUTE: 60,
	pb.RateLimitResponse_RateLimit_HOUR:   3600,
	pb.RateLimitResponse_RateLimit_DAY:    86400,
	pb.RateLimitResponse_RateLimit_WEEK:   7 * 86400,
	pb.RateLimitResponse_RateLimit_MONTH:  30 * 86400,
	pb.RateLimitResponse_RateLimit_YEAR:   365 * 86400,
}

// Limit is one rule's rate limit, immutable once loaded.
type Limit struct {
	// RequestsPerUnit and Unit are the rule's rate_limit; Name its name
	// (may be empty).
	RequestsPerUnit uint32
	Unit            pb.RateLimitResponse_RateLimit_Unit
	Name            string
	// Period is the unit times any multiplier, in nanoseconds.
	Period int64
	// Unlimited answers OK without counting.
	Unlimited bool
	// ShadowMode counts and decides, but answers OK.
	ShadowMode bool
	// QuotaMode: an over-limit quota descriptor makes the request over
	// limit only when every quota descriptor of the request is over limit.
	QuotaMode bool
	// Replaces are the names of the limits this one turns off when both
	// match one request.
	Replaces []string
	// Algorithm is the limiter; Burst is GCRA's most requests admitted at
	// once (1..2^40; requests_per_unit by default), 0 for the others.
	Algorithm Algorithm
	Burst     int64
	// Descriptor is the rule's path below its domain, "key_value.key"
	// (envoyproxy/ratelimit's statistics name), empty for a limit sent
	// with the descriptor; statsKey is its key among the statistics.
	Descriptor string
	statsKey   string
}

// request returns the engine request that takes hits from l. l must have
// RequestsPerUnit > 0 and not be Unlimited.
func (l *Limit) request(hits int64) engine.Request {
	r := engine.Request{Kind: l.Algorithm.kind(), Period: l.Period, Quantity: hits}
	switch l.Algorithm {
	case GCRA:
		r.Burst = l.Burst - 1
		r.Rate = int64(l.RequestsPerUnit)
	default:
		r.Burst = int64(l.RequestsPerUnit)
	}
	return r
}

// check reports whether l's parameters are ones the engine accepts.
func (l *Limit) check() error {
	if l.Unlimited || l.RequestsPerUnit == 0 {
		return nil
	}
	r := l.request(1)
	return r.Validate()
}

// entryKey is an exact match: the key alone (hasValue false) or a key and
// value.
type entryKey struct {
	key, value string
	hasValue   bool
}

// wildcard is a descriptor whose value holds '*': parts is the value split
// on '*', each '*' matching any run of bytes.
type wildcard struct {
	key, pattern string
	parts        []string
	node         *node
}

// node is one level of a domain's descriptor tree.
type node struct {
	children  map[entryKey]*node
	wildcards []wildcard // in file order; the first that matches wins
	limit     *Limit     // nil: no limit at this level
	// shareThreshold: entries matched through this node's wildcard share
	// one counter (the key holds the pattern, not the value).
	shareThreshold bool
}

// Config is a loaded configuration: every domain's descriptor tree. It is
// immutable and safe for concurrent use.
type Config struct {
	domains map[string]*node
	// Files are the files it was loaded from, in load order.
	Files []string
}

// Domains returns the number of domains configured.
func (c *Config) Domains() int { return len(c.domains) }

// yamlFile is one configuration file, in envoyproxy/ratelimit's format.
type yamlFile struct {
	Domain      string           `yaml:"domain"`
	Descriptors []yamlDescriptor `yaml:"descriptors"`
}

type yamlDescriptor struct {
	Key         string           `yaml:"key"`
	Value       string           `yaml:"value"`
	RateLimit   *yamlRateLimit   `yaml:"rate_limit"`
	Descriptors []yamlDescriptor `yaml:"descriptors"`
	ShadowMode  bool             `yaml:"shadow_mode"`
	QuotaMode   bool             `yaml:"quota_mode"`
	// Accepted for compatibility; they name statistics and response
	// metadata, which cellserver does not produce.
	DetailedMetric bool      `yaml:"detailed_metric"`
	ValueToMetric  bool      `yaml:"value_to_metric"`
	ShareThreshold bool      `yaml:"share_threshold"`
	Metadata       yaml.Node `yaml:"metadata"`
}

type yamlRateLimit struct {
	RequestsPerUnit uint32        `yaml:"requests_per_unit"`
	Unit            string        `yaml:"unit"`
	Unlimited       bool          `yaml:"unlimited"`
	Name            string        `yaml:"name"`
	Replaces        []yamlReplace `yaml:"replaces"`
	// cellserver's extensions.
	Algorithm string `yaml:"algorithm"`
	Burst     *int64 `yaml:"burst"`
}

type yamlReplace struct {
	Name string `yaml:"name"`
}

// newConfig returns an empty configuration: every descriptor answers OK.
func newConfig() *Config { return &Config{domains: map[string]*node{}} }

// add parses one file's content (name is used in errors) into c. Unknown
// fields, a missing domain, a domain already loaded, an empty or duplicate
// descriptor key, an invalid unit and out-of-range extension fields are
// errors wrapping ErrConfig.
func (c *Config) add(name string, content []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(content))
	dec.KnownFields(true)
	var f yamlFile
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: %s: empty file", ErrConfig, name)
		}
		return fmt.Errorf("%w: %s: %v", ErrConfig, name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: %s: one YAML document per file", ErrConfig, name)
	}
	if f.Domain == "" {
		return fmt.Errorf("%w: %s: config file cannot have empty domain", ErrConfig, name)
	}
	if _, dup := c.domains[f.Domain]; dup {
		return fmt.Errorf("%w: %s: duplicate domain %q", ErrConfig, name, f.Domain)
	}
	root := &node{children: map[entryKey]*node{}}
	if err := loadDescriptors(root, f.Domain, "", f.Descriptors); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrConfig, name, err)
	}
	setStatsKeys(root, f.Domain)
	c.domains[f.Domain] = root
	c.Files = append(c.Files, name)
	return nil
}

// loadDescriptors fills parent from ds; path names the level in errors,
// rel the same path below the domain (a limit's Descriptor).
func loadDescriptors(parent *node, path, rel string, ds []yamlDescriptor) error {
	for i := range ds {
		d := &ds[i]
		if d.Key == "" {
			return fmt.Errorf("%s: descriptor has empty key", path)
		}
		ek := entryKey{key: d.Key, value: d.Value, hasValue: d.Value != ""}
		name := d.Key
		if ek.hasValue {
			name += "_" + d.Value
		}
		here, hereRel := path+"."+name, name
		if rel != "" {
			hereRel = rel + "." + name
		}
		if _, dup := parent.children[ek]; dup {
			return fmt.Errorf("duplicate descriptor composite key '%s'", here)
		}
		if d.ShareThreshold && !strings.Contains(d.Value, "*") {
			return fmt.Errorf("%s: share_threshold can only be used with wildcard values (containing '*')", here)
		}
		n := &node{children: map[entryKey]*node{}, shareThreshold: d.ShareThreshold}
		if d.RateLimit != nil {
			l, err := loadLimit(d)
			if err != nil {
				return fmt.Errorf("%s: %v", here, err)
			}
			l.Descriptor = hereRel
			n.limit = l
		}
		if err := loadDescriptors(n, here, hereRel, d.Descriptors); err != nil {
			return err
		}
		parent.children[ek] = n
		if strings.Contains(d.Value, "*") {
			parent.wildcards = append(parent.wildcards, wildcard{key: d.Key, pattern: d.Value, parts: strings.Split(d.Value, "*"), node: n})
		}
	}
	return nil
}

// setStatsKeys gives every limit under n its key among the statistics.
func setStatsKeys(n *node, domain string) {
	if n.limit != nil {
		n.limit.statsKey = statsKey(domain, n.limit.Descriptor)
	}
	for _, c := range n.children {
		setStatsKeys(c, domain)
	}
}

// loadLimit checks and converts a descriptor's rate_limit block.
func loadLimit(d *yamlDescriptor) (*Limit, error) {
	y := d.RateLimit
	unit, validUnit := parseUnit(y.Unit)
	l := &Limit{
		RequestsPerUnit: y.RequestsPerUnit, Unit: unit, Name: y.Name,
		Unlimited: y.Unlimited, ShadowMode: d.ShadowMode, QuotaMode: d.QuotaMode,
	}
	switch {
	case y.Unlimited && validUnit:
		return nil, errors.New("should not specify rate limit unit when unlimited")
	case !y.Unlimited && !validUnit:
		return nil, fmt.Errorf("invalid rate limit unit '%s'", y.Unit)
	}
	for _, r := range y.Replaces {
		if r.Name == "" {
			return nil, errors.New("should not have an empty replaces entry")
		}
		if r.Name == y.Name {
			return nil, errors.New("replaces should not contain name of same descriptor")
		}
		l.Replaces = append(l.Replaces, r.Name)
	}
	if y.Unlimited {
		if y.Algorithm != "" || y.Burst != nil {
			return nil, errors.New("algorithm and burst do not apply to an unlimited rate limit")
		}
		return l, nil
	}
	l.Period = unitSeconds[unit] * 1e9
	switch y.Algorithm {
	case "", "gcra":
		l.Algorithm = GCRA
	case "sliding-window":
		l.Algorithm = SlidingWindow
	case "fixed-window":
		l.Algorithm = FixedWindow
	default:
		return nil, fmt.Errorf("unknown algorithm %q (gcra, sliding-window or fixed-window)", y.Algorithm)
	}
	if l.Algorithm == GCRA {
		l.Burst = max(int64(y.RequestsPerUnit), 1)
		if y.Burst != nil {
			if *y.Burst < 1 || *y.Burst > engine.MaxCount {
				return nil, fmt.Errorf("burst %d out of range (1 up to 2^40)", *y.Burst)
			}
			l.Burst = *y.Burst
		}
	} else if y.Burst != nil {
		return nil, fmt.Errorf("burst applies to the gcra algorithm only, not %s", l.Algorithm)
	}
	if err := l.check(); err != nil {
		return nil, fmt.Errorf("requests_per_unit %d per %s: %v", y.RequestsPerUnit, strings.ToLower(unit.String()), err)
	}
	return l, nil
}

// parseUnit returns the unit named s (any letter case) and whether it is a
// valid unit (not UNKNOWN).
func parseUnit(s string) (pb.RateLimitResponse_RateLimit_Unit, bool) {
	v, ok := pb.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(s)]
	u := pb.RateLimitResponse_RateLimit_Unit(v)
	return u, ok && u != pb.RateLimitResponse_RateLimit_UNKNOWN
}

// match is the outcome of looking one descriptor up.
type match struct {
	limit *Limit
	// shared[i] is the wildcard pattern that replaces entry i's value in
	// the key (share_threshold), or "" to use the value.
	shared []string
}

// lookup finds the limit of the descriptor entries in domain, with
// envoyproxy/ratelimit's rules: at each level, the entry's key and value
// match exactly first, then a value pattern with '*', then the key alone;
// the limit applies only when the last entry lands on a rule that has one;
// a level with no match, or a rule without deeper rules while entries
// remain, means no limit.
func (c *Config) lookup(domain string, entries []*rlpb.RateLimitDescriptor_Entry) match {
	n := c.domains[domain]
	if n == nil {
		return match{}
	}
	var m match
	for i, ent := range entries {
		key, value := ent.GetKey(), ent.GetValue()
		next := n.children[entryKey{key: key, value: value, hasValue: value != ""}]
		if next == nil {
			for _, w := range n.wildcards {
				if w.key == key && globMatch(w.parts, value) {
					next = w.node
					if next.shareThreshold {
						if m.shared == nil {
							m.shared = make([]string, len(entries))
						}
						m.shared[i] = w.pattern
					}
					break
				}
			}
		}
		if next == nil {
			next = n.children[entryKey{key: key}]
		}
		if next == nil {
			return match{}
		}
		if i == len(entries)-1 {
			m.limit = next.limit
			return m
		}
		if len(next.children) == 0 {
			return match{}
		}
		n = next
	}
	return match{}
}

// globMatch reports whether value matches the pattern split on '*' into
// parts, each '*' matching any run of bytes (possibly empty).
func globMatch(parts []string, value string) bool {
	if len(parts) == 1 {
		return parts[0] == value
	}
	first, last := parts[0], parts[len(parts)-1]
	if len(value) < len(first)+len(last) || !strings.HasPrefix(value, first) || !strings.HasSuffix(value, last) {
		return false
	}
	rest := value[len(first) : len(value)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}
