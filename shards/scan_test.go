package shards

import (
	"fmt"
	"sync"
	"testing"

	"github.com/cellserver/cellserver/engine"
)

// scanAll runs a full SCAN iteration with the given COUNT, calling between
// after every step, and returns how often each key was reported.
func scanAll(t *testing.T, s *Store, count int, now int64, between func(step int)) map[string]int {
	t.Helper()
	seen := map[string]int{}
	cursor := uint64(0)
	for step := 0; ; step++ {
		cursor = s.Scan(cursor, count, now, func(k []byte, kind engine.Kind) {
			if kind != engine.KindGCRA {
				t.Errorf("Scan reported %q as %v, want gcra", k, kind)
			}
			seen[string(k)]++
		})
		if cursor == 0 {
			return seen
		}
		if step > 10_000_000 {
			t.Fatal("Scan did not finish")
		}
		between(step)
	}
}

func TestScanStable(t *testing.T) {
	for _, n := range []int{0, 1, 7, 1000, 20000} {
		s := newStore(t, 4)
		for i := range n {
			s.Put([]byte(fmt.Sprint("s", i)), gcraState(t0+1e12))
		}
		for _, count := range []int{1, 10, 1000} {
			seen := scanAll(t, s, count, t0, func(int) {})
			if len(seen) != n {
				t.Errorf("n=%d COUNT %d: Scan found %d distinct keys, want %d", n, count, len(seen), n)
			}
			for k, c := range seen {
				if c != 1 { // no resize: each bucket is visited exactly once
					t.Errorf("n=%d COUNT %d: %q reported %d times on a stable table, want 1", n, count, k, c)
				}
			}
		}
	}
}

// TestScanResizesMidIteration grows the tables to many times their size and
// then shrinks them, between SCAN steps: every key present throughout is
// still reported.
func TestScanResizesMidIteration(t *testing.T) {
	s := newStore(t, 2)
	const stable = 3000
	for i := range stable {
		s.Put([]byte(fmt.Sprint("stable", i)), gcraState(t0+1e12))
	}
	var del Result
	seen := scanAll(t, s, 5, t0, func(step int) {
		// Phase 1 (steps 0..199) adds 200 keys a step (40000 in all: the
		// tables double several times); phase 2 deletes them again (the
		// tables shrink).
		switch {
		case step < 200:
			for i := range 200 {
				s.Put([]byte(fmt.Sprint("tmp", step*200+i)), gcraState(t0+1e12))
			}
		case step < 400:
			op := &Op{Code: OpDel}
			for i := range 200 {
				op.Keys = append(op.Keys, []byte(fmt.Sprint("tmp", (step-200)*200+i)))
			}
			s.Exec(op, t0, &del)
		}
	})
	for i := range stable {
		if seen[fmt.Sprint("stable", i)] == 0 {
			t.Fatalf("stable%d not reported by a SCAN during which it always existed", i)
		}
	}
}

// TestScanConcurrent: writers insert and delete keys while a scan runs; every
// key that existed throughout is reported.
func TestScanConcurrent(t *testing.T) {
	s := newStore(t, 4)
	const stable = 5000
	for i := range stable {
		s.Put([]byte(fmt.Sprint("stable", i)), gcraState(t0+1e12))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			var res Result
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := []byte(fmt.Sprint("churn", w, "/", i%20000))
				if i/20000%2 == 0 {
					s.Put(k, gcraState(t0+1e12))
				} else {
					s.Exec(&Op{Code: OpDel, Keys: [][]byte{k}}, t0, &res)
				}
			}
		})
	}
	for round := range 5 {
		seen := scanAll(t, s, 10, t0, func(int) {})
		for i := range stable {
			if seen[fmt.Sprint("stable", i)] == 0 {
				close(stop)
				wg.Wait()
				t.Fatalf("round %d: stable%d not reported", round, i)
			}
		}
	}
	close(stop)
	wg.Wait()
}
