package glob

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// A Table is an ordered list of glob patterns compiled once, so that a key
// is matched against all of them in one pass over the key: Match returns
// the first pattern (in table order) that Match(pattern, key) would
// accept, whatever the number of patterns.
//
// Each pattern is a sequence of one-byte tokens (a literal, '?', a class)
// and '*' runs, so the table is one NFA (a position in each pattern). The
// table walks the key through a DFA built lazily from it (each DFA state a
// set of NFA positions, its transitions — one int32 per byte class, in one
// flat array — filled in the first time a byte class leaves it) and kept
// in a cache of about maxCacheBytes; a full cache is dropped and built
// again. So a key costs one table look-up per byte once its path is
// cached, and at most one NFA step — O(positions alive), bounded by the
// table's total pattern length — per byte otherwise: never exponential,
// never a backtrack.
//
// A walk stops early once no pattern can match, or once the first pattern
// still alive is certain to match whatever follows (it reached its final
// '*', as "prefix*" patterns do after the prefix): a long key costs no more
// than its part that decides.
//
// A Table is immutable for its user and safe for concurrent use: matching
// takes no lock on cached paths; filling in a transition takes the table's
// mutex.
type Table struct {
	n       int        // patterns
	nfa     []position // every pattern's positions, pattern after pattern
	sets    [][4]uint64
	classOf [256]uint8 // byte → byte class (bytes no pattern tells apart share one)
	rep     []byte     // byte class → a byte of it
	start   []int32    // the start DFA state's positions

	cur    atomic.Pointer[dfaCache]
	resets atomic.Uint64

	mu      sync.Mutex // serialises filling in transitions; guards what follows
	mark    []uint32   // per position: the step that last added it
	step    uint32
	scratch []int32
}

// MaxRules is the most patterns a rule table (limit-override,
// limit-shadow, metrics-class, region-policy) may hold, and MaxPatternLen
// the longest pattern, in bytes: CheckRules enforces both where a table's
// setting is parsed. With them, a table holds at most 1024 × 513 NFA
// positions, which bounds the cost of one NFA step and of Compile.
const (
	MaxRules      = 1024
	MaxPatternLen = 512
)

// maxCacheBytes bounds one table's DFA cache (states and their
// transitions); a full cache is dropped and built again.
const maxCacheBytes = 2 << 20

// Errors of CheckRules.
var (
	// ErrTooManyRules is returned for more than MaxRules patterns.
	ErrTooManyRules = errors.New("too many rules")
	// ErrPatternTooLong is returned for a pattern longer than
	// MaxPatternLen.
	ErrPatternTooLong = errors.New("pattern too long")
)

// CheckRules checks a rule table's patterns against MaxRules and
// MaxPatternLen; the error says the count or the rule, and the cap.
func CheckRules(patterns []string) error {
	if len(patterns) > MaxRules {
		return fmt.Errorf("%w: %d, at most %d", ErrTooManyRules, len(patterns), MaxRules)
	}
	for i, p := range patterns {
		if len(p) > MaxPatternLen {
			return fmt.Errorf("rule %d: %w: %d bytes, at most %d", i+1, ErrPatternTooLong, len(p), MaxPatternLen)
		}
	}
	return nil
}

// position kinds.
const (
	posLit   = iota // consumes the byte lit
	posAny          // consumes any byte ('?')
	posClass        // consumes a byte of sets[set]
	posStar         // consumes any run ('*'): stays, and the next position is live too
	posFinal        // the pattern matched (if the key ends here)
)

// position is one place in one pattern.
type position struct {
	kind uint8
	lit  byte
	// sure: a posFinal just after a '*': once live it stays live, so the
	// pattern matches whatever follows.
	sure bool
	set  int32 // posClass: index in Table.sets
	rule int32 // the pattern's index
}

// dfaState is one set of live positions (the walk's state), as the
// mutex holder sees it.
type dfaState struct {
	set string // live positions, ascending, 4 bytes each (little endian); the cache's key
	id  int32
}

// stateInfo is what a walk needs of a state besides its transitions.
type stateInfo struct {
	// early: -2 keep reading; -1 no pattern can match; ≥0 that pattern
	// matches whatever follows.
	early int32
	final int32 // the pattern matching a key that ends here, or -1
}

// dfaTab is a generation's transitions, flat: next[id×classes + class] is
// the target's id×classes, shifted left by one, with bit 0 set when the
// target's early is not -2; 0: not filled in yet. A full dfaTab is copied
// into one twice its size; a walk holding the old one finds a transition
// filled in since missing, and gets the new one from fill.
type dfaTab struct {
	next []atomic.Int32
	info []stateInfo // by id; written before any transition to it
}

// dfaCache is one generation of the DFA. Id 0 is unused, so that a
// transition is never 0.
type dfaCache struct {
	start  int32 // the start state's encoded transition
	tab    atomic.Pointer[dfaTab]
	states []*dfaState          // by id; guarded by Table.mu
	index  map[string]*dfaState // by set; guarded by Table.mu
	bytes  int                  // guarded by Table.mu
}

// Compile compiles patterns (Redis globs, as Match reads them) into a
// Table. Its cost is linear in the patterns' total length (and 256 steps
// per character class); rule tables bound it with CheckRules.
func Compile(patterns []string) *Table {
	t := &Table{n: len(patterns)}
	setIndex := map[[4]uint64]int32{}
	for i, p := range patterns {
		t.nfa = t.compilePattern(t.nfa, []byte(p), int32(i), setIndex)
	}
	t.classes()
	t.mark = make([]uint32, len(t.nfa))
	t.step = 1
	for q := range t.nfa {
		if q == 0 || t.nfa[q-1].kind == posFinal {
			t.add(int32(q)) // a pattern's first position
		}
	}
	t.start = slices.Clone(t.scratch)
	t.scratch = t.scratch[:0]
	t.newCache()
	return t
}

// compilePattern appends pattern p's positions (rule i) to nfa: the same
// tokens, read the same way, as Match.
func (t *Table) compilePattern(nfa []position, p []byte, rule int32, setIndex map[[4]uint64]int32) []position {
	for pi := 0; pi < len(p); {
		switch p[pi] {
		case '*':
			for pi < len(p) && p[pi] == '*' {
				pi++
			}
			nfa = append(nfa, position{kind: posStar, rule: rule})
			continue
		case '?':
			nfa = append(nfa, position{kind: posAny, rule: rule})
			pi++
			continue
		case '[':
			var set [4]uint64
			next := pi
			for c := 0; c < 256; c++ {
				var ok bool
				ok, next = matchClass(p, pi, byte(c)) // next does not depend on c
				if ok {
					set[c>>6] |= 1 << (c & 63)
				}
			}
			idx, ok := setIndex[set]
			if !ok {
				idx = int32(len(t.sets))
				t.sets = append(t.sets, set)
				setIndex[set] = idx
			}
			nfa = append(nfa, position{kind: posClass, set: idx, rule: rule})
			pi = next
			continue
		case '\\':
			if pi+1 < len(p) {
				nfa = append(nfa, position{kind: posLit, lit: p[pi+1], rule: rule})
				pi += 2
				continue
			}
		}
		nfa = append(nfa, position{kind: posLit, lit: p[pi], rule: rule})
		pi++
	}
	sure := len(nfa) > 0 && nfa[len(nfa)-1].rule == rule && nfa[len(nfa)-1].kind == posStar
	return append(nfa, position{kind: posFinal, sure: sure, rule: rule})
}

// classes splits the bytes into classes that no position tells apart, so
// that a DFA state needs one transition per class, not per byte.
func (t *Table) classes() {
	var class [256]int
	n := 1
	refine := func(in func(c int) bool) {
		ids := make(map[[2]int]int, 2*n)
		for c := 0; c < 256; c++ {
			k := [2]int{class[c], 0}
			if in(c) {
				k[1] = 1
			}
			id, ok := ids[k]
			if !ok {
				id = len(ids)
				ids[k] = id
			}
			class[c] = id
		}
		n = len(ids)
	}
	var lits [256]bool
	for _, q := range t.nfa {
		if q.kind == posLit {
			lits[q.lit] = true
		}
	}
	for b := range lits {
		if lits[b] {
			refine(func(c int) bool { return c == b })
		}
	}
	for _, s := range t.sets {
		refine(func(c int) bool { return s[c>>6]&(1<<(c&63)) != 0 })
	}
	t.rep = make([]byte, n)
	seen := make([]bool, n)
	for c := 0; c < 256; c++ {
		t.classOf[c] = uint8(class[c])
		if !seen[class[c]] {
			seen[class[c]] = true
			t.rep[class[c]] = byte(c)
		}
	}
}

// Len returns the number of patterns.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return t.n
}

// Match returns the index of the first pattern matching key, or -1. It
// does not allocate once the key's path is cached. A nil Table matches
// nothing.
func (t *Table) Match(key []byte) int {
	if t == nil || t.n == 0 {
		return -1
	}
	c := t.cur.Load()
	tab := c.tab.Load()
	cur := c.start
	for i := 0; i < len(key); i++ {
		if cur&1 != 0 {
			return int(tab.info[int(cur>>1)/len(t.rep)].early)
		}
		k := int(t.classOf[key[i]])
		next := tab.next[int(cur>>1)+k].Load()
		if next == 0 {
			next, c, tab = t.fill(c, cur, k)
		}
		cur = next
	}
	inf := tab.info[int(cur>>1)/len(t.rep)]
	if inf.early >= 0 {
		return int(inf.early)
	}
	return int(inf.final)
}

// Resets returns how many times the DFA cache was dropped because it was
// full.
func (t *Table) Resets() uint64 { return t.resets.Load() }

// fill computes where class k leads from the state cur of generation c,
// records it, and returns it with the generation and transitions the
// walk goes on with (another generation when the cache was dropped).
func (t *Table) fill(c *dfaCache, cur int32, k int) (int32, *dfaCache, *dfaTab) {
	t.mu.Lock()
	defer t.mu.Unlock()
	from := c.states[int(cur>>1)/len(t.rep)]
	if c == t.cur.Load() {
		tab := c.tab.Load()
		if next := tab.next[int(cur>>1)+k].Load(); next != 0 {
			return next, c, tab // filled in meanwhile
		}
	}
	b := t.rep[k]
	if t.step++; t.step == 0 { // wrapped: old marks could pass for this step's
		clear(t.mark)
		t.step = 1
	}
	t.scratch = t.scratch[:0]
	for i := 0; i < len(from.set); i += 4 {
		q := int32(binary.LittleEndian.Uint32([]byte(from.set[i : i+4])))
		p := &t.nfa[q]
		switch p.kind {
		case posStar:
			t.add(q)
		case posAny:
			t.add(q + 1)
		case posLit:
			if p.lit == b {
				t.add(q + 1)
			}
		case posClass:
			if t.sets[p.set][b>>6]&(1<<(b&63)) != 0 {
				t.add(q + 1)
			}
		}
	}
	next, nc := t.intern(t.scratch)
	tab := nc.tab.Load()
	if nc == c {
		tab.next[int(cur>>1)+k].Store(next)
	}
	return next, nc, tab
}

// add adds position q, and the positions a '*' makes live with it, to the
// scratch set. Called with mu held.
func (t *Table) add(q int32) {
	for {
		if t.mark[q] == t.step {
			return
		}
		t.mark[q] = t.step
		t.scratch = append(t.scratch, q)
		if t.nfa[q].kind != posStar {
			return
		}
		q++
	}
}

// intern returns the encoded transition to the DFA state of the live
// positions set (which it may reorder and trim), made if new, and the
// generation it is in (a new one when the cache was full). Called with mu
// held.
func (t *Table) intern(set []int32) (int32, *dfaCache) {
	key, inf := t.canon(set)
	c := t.cur.Load()
	if s, ok := c.index[string(key)]; ok {
		return t.encode(s.id, c), c
	}
	if c.bytes+t.stateSize(key) > maxCacheBytes && len(c.states) > 2 {
		t.resets.Add(1)
		c = t.newCache()
		if s, ok := c.index[string(key)]; ok {
			return t.encode(s.id, c), c
		}
	}
	return t.addState(c, key, inf), c
}

// canon sorts set, drops the positions a sure pattern makes moot, and
// returns the state's key and info.
func (t *Table) canon(set []int32) ([]byte, stateInfo) {
	slices.Sort(set)
	inf := stateInfo{early: -2, final: -1}
	// A sure pattern makes every later pattern moot: drop their positions.
	for i, q := range set {
		p := &t.nfa[q]
		if p.kind == posFinal && p.sure {
			j := i + 1
			for j < len(set) && t.nfa[set[j]].rule == p.rule {
				j++
			}
			set = set[:j]
			if t.nfa[set[0]].rule == p.rule {
				inf.early = p.rule
			}
			break
		}
	}
	if len(set) == 0 {
		inf.early = -1
	}
	for _, q := range set {
		if t.nfa[q].kind == posFinal {
			inf.final = t.nfa[q].rule
			break
		}
	}
	key := make([]byte, 4*len(set))
	for i, q := range set {
		binary.LittleEndian.PutUint32(key[4*i:], uint32(q))
	}
	return key, inf
}

// stateSize is what a state of key costs the cache, in bytes.
func (t *Table) stateSize(key []byte) int { return len(key) + 4*len(t.rep) + 96 }

// addState adds the state of key to c and returns its encoded transition.
// Called with mu held (or on a c not yet published).
func (t *Table) addState(c *dfaCache, key []byte, inf stateInfo) int32 {
	ncls := len(t.rep)
	s := &dfaState{set: string(key), id: int32(len(c.states))}
	tab := c.tab.Load()
	if need := (len(c.states) + 1) * ncls; need > len(tab.next) {
		grown := &dfaTab{next: make([]atomic.Int32, 2*need), info: make([]stateInfo, 2*len(c.states)+2)}
		for i := range tab.next {
			grown.next[i].Store(tab.next[i].Load())
		}
		copy(grown.info, tab.info)
		tab = grown
		c.tab.Store(tab)
	}
	tab.info[s.id] = inf
	c.states = append(c.states, s)
	c.index[s.set] = s
	c.bytes += t.stateSize(key)
	return t.encode(s.id, c)
}

// encode returns the transition to state id of c.
func (t *Table) encode(id int32, c *dfaCache) int32 {
	v := id * int32(len(t.rep)) << 1
	if c.tab.Load().info[id].early != -2 {
		v |= 1
	}
	return v
}

// newCache makes a new generation of the DFA, its start state only, and
// puts it in force. Called with mu held, or from Compile.
func (t *Table) newCache() *dfaCache {
	ncls := len(t.rep)
	c := &dfaCache{index: make(map[string]*dfaState), states: []*dfaState{nil}}
	c.tab.Store(&dfaTab{next: make([]atomic.Int32, 8*ncls), info: make([]stateInfo, 8)})
	key, inf := t.canon(slices.Clone(t.start))
	c.start = t.addState(c, key, inf)
	t.cur.Store(c) // published whole: a walk may load it at once
	return c
}
