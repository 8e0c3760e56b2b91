package keyclass

import (
	"bytes"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/cellserver/cellserver/internal/rules"
)

// DefaultLimit is metrics-class-limit's default: prefix classes.
const DefaultLimit = 100

// MaxLimit bounds Limit: learning a prefix copies the prefix table, so
// learning them all costs O(Limit²) once.
const MaxLimit = 10000

// MaxClasses bounds the classes of one Classes, so the label values of a
// class metric: MaxRules rules, MaxLimit prefixes and Other. Every key
// beyond them counts under Other.
const MaxClasses = MaxRules + MaxLimit + 1

// Kind says where a class comes from.
type Kind uint8

const (
	KindRule   Kind = iota // a configured rule
	KindPrefix             // a key prefix
	KindOther              // Other
)

var kindNames = [...]string{KindRule: "rule", KindPrefix: "prefix", KindOther: "other"}

// String returns "rule", "prefix" or "other".
func (k Kind) String() string { return kindNames[k] }

// Config chooses the classes.
type Config struct {
	// Rules are tried first, in order.
	Rules Rules
	// Limit is how many prefixes get a class of their own (0..MaxLimit).
	Limit int
}

// counter is one stripe of a class's counts, alone on its cache line.
type counter struct {
	allowed, limited atomic.Int64
	_                [48]byte
}

// Class is one class's counters. Its methods are safe for concurrent use.
type Class struct {
	name string
	n    []counter // stripes, a power of two
}

// Name returns the class's name (a prefix class's is the prefix).
func (c *Class) Name() string { return c.name }

// Count adds one decision to the class, on the stripe of id (any integer:
// a connection id).
func (c *Class) Count(id int64, limited bool) {
	s := &c.n[int(id)&(len(c.n)-1)]
	if limited {
		s.limited.Add(1)
	} else {
		s.allowed.Add(1)
	}
}

func (c *Class) counts() (allowed, limited int64) {
	for i := range c.n {
		allowed += c.n[i].allowed.Load()
		limited += c.n[i].limited.Load()
	}
	return allowed, limited
}

func (c *Class) reset() {
	for i := range c.n {
		c.n[i].allowed.Store(0)
		c.n[i].limited.Store(0)
	}
}

// prefixes is the prefix table, immutable once published: each known
// prefix's class (a prefix named like a rule, or Other, maps to that
// class and takes no place), and the prefix classes in the order learned.
type prefixes struct {
	m     map[string]*Class
	order []*Class
}

// Classes classifies keys and holds the counts of its classes. Its methods
// are safe for concurrent use. Memory: about 64 bytes × stripes per class
// (stripes: the CPUs, rounded up to a power of two, at most 16), plus the
// prefix table.
type Classes struct {
	cfg     Config
	stripes int
	rules   []*Class // the rules' classes, in order
	table   *rules.Table[Rule]
	other   *Class

	mu   sync.Mutex // serialises learning
	pref atomic.Pointer[prefixes]
}

// New returns the classes of cfg, or nil when cfg has no rules and a Limit
// of 0 (classes off). The rules' patterns are compiled into one
// glob.Table (a Rules longer than MaxRules, which ParseRules refuses,
// still works, at the cost of its compilation). Every class of prev (nil: none) whose name cfg keeps
// — a rule's, Other, or a prefix class while Limit has room for it, in
// prev's order — keeps its counts; the others start from 0.
func New(cfg Config, prev *Classes) *Classes {
	if len(cfg.Rules) == 0 && cfg.Limit <= 0 {
		return nil
	}
	cfg.Limit = min(max(cfg.Limit, 0), MaxLimit)
	stripes := 1
	for stripes < runtime.GOMAXPROCS(0) && stripes < 16 {
		stripes <<= 1
	}
	if prev != nil {
		stripes = prev.stripes // counters carried over keep their stripes
	}
	c := &Classes{cfg: cfg, stripes: stripes}
	p := &prefixes{m: make(map[string]*Class, len(cfg.Rules)+1)} // the rules' names and Other first
	old := func(name string) *Class {
		if prev != nil {
			if cl := prev.lookupName(name); cl != nil {
				return cl
			}
		}
		return &Class{name: name, n: make([]counter, stripes)}
	}
	for _, r := range cfg.Rules {
		cl := old(r.Name)
		c.rules = append(c.rules, cl)
		p.m[r.Name] = cl
	}
	c.table = ruleSyntax.Compile(cfg.Rules)
	c.other = old(Other)
	p.m[Other] = c.other
	if prev != nil {
		for _, cl := range prev.pref.Load().order {
			if len(p.order) == cfg.Limit {
				break
			}
			if _, taken := p.m[cl.name]; !taken {
				p.m[cl.name] = cl
				p.order = append(p.order, cl)
			}
		}
	}
	c.pref.Store(p)
	return c
}

// Config returns the configuration c was made with.
func (c *Classes) Config() Config { return c.cfg }

// lookupName returns the class named name, or nil.
func (c *Classes) lookupName(name string) *Class {
	return c.pref.Load().m[name] // holds every rule's class and Other too
}

// Classify returns key's class. It does not allocate, and takes a lock
// only the first time a prefix is seen while Limit has room.
func (c *Classes) Classify(key []byte) *Class {
	return c.ClassifyCached(key, nil)
}

// Cache remembers the last prefix one caller classified (a connection's
// keys often share it), so that the next key of that prefix skips the
// prefix table. A Cache is for one goroutine at a time; its zero value is
// empty. Its buffer is allocated once, on first use.
type Cache struct {
	owner  *Classes
	prefix []byte
	class  *Class
}

// Tally gathers one writer's decisions (a connection's, during a pipeline)
// in plain counters, and adds them to their classes at Flush: one atomic
// add per class touched instead of one per decision. Counts become visible
// at Flush. A Tally is for one goroutine at a time; its zero value is
// empty.
type Tally struct {
	Cache
	pend []pending
}

type pending struct {
	class            *Class
	allowed, limited int64
}

// maxPending is how many classes a Tally holds before it flushes itself.
const maxPending = 8

// Count classifies key (with t's cache) and counts a decision under its
// class, until Flush.
func (c *Classes) Count(t *Tally, key []byte, limited bool) {
	cl := c.ClassifyCached(key, &t.Cache)
	var p *pending
	for i := range t.pend {
		if t.pend[i].class == cl {
			p = &t.pend[i]
			break
		}
	}
	if p == nil {
		if len(t.pend) == maxPending {
			t.Flush(0)
		}
		t.pend = append(t.pend, pending{class: cl})
		p = &t.pend[len(t.pend)-1]
	}
	if limited {
		p.limited++
	} else {
		p.allowed++
	}
}

// Flush adds the counts gathered to their classes, on the stripe of id.
// A class dropped meanwhile by a new configuration loses them.
func (t *Tally) Flush(id int64) {
	for i := range t.pend {
		p := &t.pend[i]
		s := &p.class.n[int(id)&(len(p.class.n)-1)]
		if p.allowed != 0 {
			s.allowed.Add(p.allowed)
		}
		if p.limited != 0 {
			s.limited.Add(p.limited)
		}
	}
	clear(t.pend)
	t.pend = t.pend[:0]
}

// Pending reports whether t holds counts not yet flushed.
func (t *Tally) Pending() bool { return len(t.pend) > 0 }

// ClassifyCached is Classify with cc (nil: none) remembering the last
// prefix: a prefix's class never changes within one Classes.
func (c *Classes) ClassifyCached(key []byte, cc *Cache) *Class {
	if i := c.table.Index(key); i >= 0 {
		return c.rules[i]
	}
	if cc != nil && cc.owner == c {
		// The cached prefix holds no ':', so a key that starts with it
		// and a ':' has that prefix: no need to look for the ':'.
		if n := len(cc.prefix); len(key) > n && key[n] == ':' && string(key[:n]) == string(cc.prefix) {
			return cc.class
		}
	}
	i := bytes.IndexByte(key, ':')
	if i < 0 {
		return c.other
	}
	prefix := key[:i]
	cl := c.prefixClass(prefix)
	if cc != nil && len(prefix) <= MaxNameLen {
		if cc.prefix == nil {
			cc.prefix = make([]byte, 0, MaxNameLen)
		}
		cc.owner, cc.prefix, cc.class = c, append(cc.prefix[:0], prefix...), cl
	}
	return cl
}

// prefixClass returns the class of a key prefix.
func (c *Classes) prefixClass(prefix []byte) *Class {
	p := c.pref.Load()
	if cl, ok := p.m[string(prefix)]; ok {
		return cl
	}
	if len(p.order) >= c.cfg.Limit || !validPrefix(prefix) {
		return c.other
	}
	return c.learn(prefix)
}

// learn gives prefix a class, if there is still room.
func (c *Classes) learn(prefix []byte) *Class {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pref.Load()
	if cl, ok := p.m[string(prefix)]; ok {
		return cl // learned meanwhile
	}
	if len(p.order) >= c.cfg.Limit {
		return c.other
	}
	cl := &Class{name: string(prefix), n: make([]counter, c.stripes)}
	np := &prefixes{m: make(map[string]*Class, len(p.m)+1), order: make([]*Class, len(p.order), len(p.order)+1)}
	for k, v := range p.m {
		np.m[k] = v
	}
	copy(np.order, p.order)
	np.m[cl.name] = cl
	np.order = append(np.order, cl)
	c.pref.Store(np)
	return cl
}

// Counts is one class's decisions.
type Counts struct {
	Name             string
	Kind             Kind
	Allowed, Limited int64
}

// Counts returns every class's counts: the rules' in order, then the
// prefix classes in the order they were learned, then Other.
func (c *Classes) Counts() []Counts {
	p := c.pref.Load()
	out := make([]Counts, 0, len(c.rules)+len(p.order)+1)
	add := func(cl *Class, k Kind) {
		a, l := cl.counts()
		out = append(out, Counts{Name: cl.name, Kind: k, Allowed: a, Limited: l})
	}
	for _, cl := range c.rules {
		add(cl, KindRule)
	}
	for _, cl := range p.order {
		add(cl, KindPrefix)
	}
	add(c.other, KindOther)
	return out
}

// Learned returns how many prefixes have a class.
func (c *Classes) Learned() int { return len(c.pref.Load().order) }

// Reset zeroes every class's counts; the prefix classes stay.
func (c *Classes) Reset() {
	p := c.pref.Load()
	for _, cl := range p.m {
		cl.reset()
	}
}
