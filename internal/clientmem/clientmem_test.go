package clientmem

import (
	"fmt"
	"testing"
)

func TestParseLimit(t *testing.T) {
	for _, tc := range []struct {
		in, want string // want: String() of the result, or the error's text
		err      bool
	}{
		{in: "auto", want: "auto"},
		{in: "AUTO", want: "auto"},
		{in: "0", want: "0"},
		{in: "64mb", want: "67108864"},
		{in: "1048576", want: "1048576"},
		{in: "10%", want: "10%"},
		{in: "100%", want: "100%"},
		{in: "0%", want: "a percentage of maxmemory must be from 1% to 100%", err: true},
		{in: "101%", want: "a percentage of maxmemory must be from 1% to 100%", err: true},
		{in: "x%", want: "a percentage of maxmemory must be from 1% to 100%", err: true},
		{in: "-1", want: errLimit.Error(), err: true},
		{in: "lots", want: errLimit.Error(), err: true},
		{in: "", want: errLimit.Error(), err: true},
	} {
		l, err := ParseLimit(tc.in)
		switch {
		case tc.err && (err == nil || err.Error() != tc.want):
			t.Errorf("ParseLimit(%q) = %v, %v; want error %q", tc.in, l, err, tc.want)
		case !tc.err && (err != nil || l.String() != tc.want):
			t.Errorf("ParseLimit(%q) = %v, %v; want %s", tc.in, l, err, tc.want)
		case !tc.err:
			// What CONFIG GET shows parses back to the same setting.
			if back, err := ParseLimit(l.String()); err != nil || back != l {
				t.Errorf("ParseLimit(%q) = %v, %v; want %v", l.String(), back, err, l)
			}
		}
	}
}

func TestLimitBytes(t *testing.T) {
	const mb = 1 << 20
	auto := Limit{Auto: true}
	for _, tc := range []struct {
		l         Limit
		maxmemory int64
		want      int64
	}{
		{auto, 0, 1024 * mb},
		{auto, 20 * mb, 16 * mb},     // half is 10mb: the floor
		{auto, 100 * mb, 50 * mb},    // half
		{auto, 8192 * mb, 1024 * mb}, // half is 4gb: the ceiling
		{Limit{Percent: 10}, 0, 0},   // no maxmemory: no limit, as Redis
		{Limit{Percent: 10}, 100 * mb, 10 * mb},
		{Limit{Percent: 100}, 20 * mb, 20 * mb},
		{Limit{Percent: 1}, 1 * mb, MinLimit}, // 10 KiB: Redis's floor
		{Limit{Size: 64 * mb}, 0, 64 * mb},
		{Limit{Size: 64 * mb}, 20 * mb, 64 * mb},
		{Limit{Size: 1024}, 0, MinLimit},
		{Limit{}, 20 * mb, 0}, // 0: no limit
	} {
		if got := tc.l.Bytes(tc.maxmemory); got != tc.want {
			t.Errorf("%s.Bytes(%d) = %d, want %d", tc.l, tc.maxmemory, got, tc.want)
		}
	}
}

// TestChoose checks that the largest clients go first and only as many as
// bring the total within the limit.
func TestChoose(t *testing.T) {
	for _, tc := range []struct {
		mems         []int64
		total, limit int64
		want         []int64 // evicted, in order
		left         int64
	}{
		{[]int64{10, 50, 30}, 90, 100, nil, 90},
		{[]int64{10, 50, 30}, 90, 60, []int64{50}, 40},
		{[]int64{10, 50, 30}, 90, 5, []int64{50, 30, 10}, 0},
		{[]int64{10}, 100, 50, []int64{10}, 90}, // the rest is not evictable
	} {
		var cands []Candidate[int]
		for i, m := range tc.mems {
			cands = append(cands, Candidate[int]{Client: i, Mem: m})
		}
		got, left := Choose(cands, tc.total, tc.limit)
		var mems []int64
		for _, c := range got {
			mems = append(mems, c.Mem)
		}
		if fmt.Sprint(mems) != fmt.Sprint(tc.want) || left != tc.left {
			t.Errorf("Choose(%v, %d, %d) = %v, %d; want %v, %d", tc.mems, tc.total, tc.limit, mems, left, tc.want, tc.left)
		}
	}
}

// TestPool checks the bound's computation and that a growth past it asks
// for one eviction pass until the pass begins.
func TestPool(t *testing.T) {
	p := NewPool(Limit{Percent: 50}, 10<<20)
	<-p.Wanted() // NewPool asks for a pass: clients may be over the bound
	p.Begin()
	if p.Bound() != 5<<20 {
		t.Fatalf("Bound() = %d, want %d", p.Bound(), 5<<20)
	}
	p.Add(5 << 20)
	if p.Over() {
		t.Fatal("Over() at the bound")
	}
	p.Add(1)
	p.Add(1)
	select {
	case <-p.Wanted():
	default:
		t.Fatal("a growth past the bound did not ask for a pass")
	}
	select {
	case <-p.Wanted():
		t.Fatal("two signals for one pass")
	default:
	}
	p.SetLimit(Limit{Size: 0}, 10<<20)
	if p.Bound() != 0 || p.Over() || p.Setting().String() != "0" {
		t.Fatalf("after SetLimit(0): bound %d, over %v", p.Bound(), p.Over())
	}
}

// TestEvict: a pass evicts the largest clients until the total is within
// the bound, counts them, and warns when it cannot get there.
func TestEvict(t *testing.T) {
	for _, tc := range []struct {
		name    string
		total   int64 // what the clients account for
		cands   []int64
		want    []string
		within  bool
		warned  bool
		evicted int64
	}{
		{"under the bound", 1 << 20, []int64{1 << 20}, nil, true, false, 0},
		{"largest first", 3 << 20, []int64{1 << 20, 2 << 20}, []string{"c1"}, true, false, 1},
		{"not enough", 4 << 20, []int64{1 << 20}, []string{"c0"}, false, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPool(Limit{Size: 2 << 20}, 0)
			p.Add(tc.total)
			var got []string
			warned := false
			within := Evict(p, func() ([]Candidate[string], int64) {
				var cs []Candidate[string]
				for i, m := range tc.cands {
					cs = append(cs, Candidate[string]{Client: fmt.Sprintf("c%d", i), Mem: m})
				}
				return cs, tc.total
			}, func(c Candidate[string], total, limit int64) {
				got = append(got, c.Client)
			}, func(total, limit int64) { warned = true })
			if within != tc.within || warned != tc.warned || fmt.Sprint(got) != fmt.Sprint(tc.want) || p.Evicted() != tc.evicted {
				t.Errorf("Evict: within %v, warned %v, evicted %v (%d); want %v, %v, %v (%d)", within, warned, got, p.Evicted(), tc.within, tc.warned, tc.want, tc.evicted)
			}
		})
	}
}

// TestClientTrack: a client's figure moves the pool's total by its
// changes only, asks for a pass past the bound, and leaves with Untrack.
func TestClientTrack(t *testing.T) {
	p := NewPool(Limit{Size: 1 << 20}, 0)
	select { // NewPool's SetLimit asked for a pass
	case <-p.Wanted():
		p.Begin()
	default:
	}
	var a, b Client
	a.Track(p, 100)
	b.Track(p, 200)
	a.Track(p, 100)
	if p.Total() != 300 || a.Mem() != 100 {
		t.Fatalf("total %d, a %d; want 300, 100", p.Total(), a.Mem())
	}
	select {
	case <-p.Wanted():
		t.Fatal("a pass was asked for under the bound")
	default:
	}
	a.Track(p, 2<<20)
	select {
	case <-p.Wanted():
	default:
		t.Fatal("no pass asked for past the bound")
	}
	a.Untrack(p)
	if p.Total() != 200 || a.Mem() != 0 {
		t.Errorf("after Untrack: total %d, a %d; want 200, 0", p.Total(), a.Mem())
	}
}
