package rls

import (
	"strings"
	"sync"
	"sync/atomic"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

// Per-descriptor statistics, as envoyproxy/ratelimit keeps them: for each
// domain and descriptor (the rule's path, "key_value.key"), the hits that
// reached it, went over its limit, came near it, and went over it under
// shadow mode. The pairs are bounded: the first StatsLimit seen are
// counted on their own, later ones under Overflow.

// DefaultStatsLimit is rls-stats-limit's default.
const DefaultStatsLimit = 1000

// Overflow is the domain and descriptor the pairs beyond the stats limit
// are counted under.
const Overflow = "_overflow"

// NearLimitPercent defines near_limit: an allowed decision that leaves at
// most this share of the limit remaining (remaining ≤ 20% of the limit).
const NearLimitPercent = 20

// DescriptorStats are one domain and descriptor's counts since the
// service started. Hits are hits_addend (1 when not set): a request of 3
// hits counts 3.
type DescriptorStats struct {
	// Domain and Descriptor name the rule: Descriptor is its path below
	// the domain, each level "key" or "key_value" (a rule's value as the
	// file writes it, a wildcard included), joined by '.'; a limit sent by
	// Envoy with the descriptor is named by the request's entries. Both
	// are Overflow for the pairs beyond the stats limit.
	Domain, Descriptor string
	// TotalHits counts the hits of every decided descriptor with a limit
	// (an unlimited one included; refunds and peeks of 0 hits are not
	// hits).
	TotalHits int64
	// OverLimit counts the hits over the limit, shadow-mode ones included
	// (as envoyproxy/ratelimit counts them).
	OverLimit int64
	// NearLimit counts the hits allowed that left at most
	// NearLimitPercent of the limit remaining.
	NearLimit int64
	// ShadowOverLimit counts the hits over the limit of a shadow-mode rule
	// (answered OK).
	ShadowOverLimit int64
}

// descCounters are one pair's running counts.
type descCounters struct {
	domain, descriptor            string
	total, over, near, shadowOver atomic.Int64
}

func (c *descCounters) stats() DescriptorStats {
	return DescriptorStats{
		Domain: c.domain, Descriptor: c.descriptor,
		TotalHits: c.total.Load(), OverLimit: c.over.Load(), NearLimit: c.near.Load(), ShadowOverLimit: c.shadowOver.Load(),
	}
}

// descTable is the pairs counted on their own, immutable once published.
type descTable struct {
	m     map[string]*descCounters // statsKey → counters
	order []*descCounters
}

// descStats holds every pair's counters. A known pair is found without a
// lock (the table is copied on write, at most limit times).
type descStats struct {
	limit    int
	mu       sync.Mutex // serialises additions
	table    atomic.Pointer[descTable]
	overflow descCounters
}

func newDescStats(limit int) *descStats {
	if limit <= 0 {
		limit = DefaultStatsLimit
	}
	d := &descStats{limit: limit, overflow: descCounters{domain: Overflow, descriptor: Overflow}}
	d.table.Store(&descTable{m: map[string]*descCounters{}})
	return d
}

// statsKey is a pair's key in the table.
func statsKey(domain, descriptor string) string { return domain + "\x00" + descriptor }

// get returns the counters of the pair key (a statsKey), added if there is
// room, else the overflow's.
func (d *descStats) get(key string) *descCounters {
	t := d.table.Load()
	if c, ok := t.m[key]; ok {
		return c
	}
	if len(t.order) >= d.limit {
		return &d.overflow
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	t = d.table.Load()
	if c, ok := t.m[key]; ok {
		return c
	}
	if len(t.order) >= d.limit {
		return &d.overflow
	}
	domain, descriptor, _ := strings.Cut(key, "\x00")
	c := &descCounters{domain: domain, descriptor: descriptor}
	nt := &descTable{m: make(map[string]*descCounters, len(t.m)+1), order: append(t.order[:len(t.order):len(t.order)], c)}
	for k, v := range t.m {
		nt.m[k] = v
	}
	nt.m[key] = c
	d.table.Store(nt)
	return c
}

// all returns every pair's counts, in the order first seen, then the
// overflow's when it counted anything.
func (d *descStats) all() []DescriptorStats {
	t := d.table.Load()
	out := make([]DescriptorStats, 0, len(t.order)+1)
	for _, c := range t.order {
		out = append(out, c.stats())
	}
	if o := d.overflow.stats(); o.TotalHits != 0 || o.OverLimit != 0 || o.NearLimit != 0 {
		out = append(out, o)
	}
	return out
}

// count records one decided descriptor of hits (> 0) on c.
func (c *descCounters) count(hits int64, limited, shadow, near bool) {
	c.total.Add(hits)
	switch {
	case limited:
		c.over.Add(hits)
		if shadow {
			c.shadowOver.Add(hits)
		}
	case near:
		c.near.Add(hits)
	}
}

// descriptorPath names a descriptor by its entries, "key_value.key_value",
// as envoyproxy/ratelimit names a limit sent with the descriptor (which
// has no rule to be named by).
func descriptorPath(entries []*rlpb.RateLimitDescriptor_Entry) string {
	var b strings.Builder
	for i, e := range entries {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(e.GetKey())
		if v := e.GetValue(); v != "" {
			b.WriteByte('_')
			b.WriteString(v)
		}
	}
	return b.String()
}
