package timerheap

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestHeap(t *testing.T) {
	var h Heap[int]
	if _, ok := h.Next(); ok {
		t.Fatal("Next of an empty heap reports ok")
	}
	for _, c := range []struct {
		at    int64
		first bool
	}{{50, true}, {70, false}, {30, true}, {30, false}, {40, false}, {10, true}} {
		if got := h.Push(c.at, int(c.at)); got != c.first {
			t.Errorf("Push(%d) first = %v, want %v", c.at, got, c.first)
		}
	}
	if at, ok := h.Next(); at != 10 || !ok {
		t.Errorf("Next = %d, %v, want 10, true", at, ok)
	}
	if got := h.PopDue(9, nil); len(got) != 0 {
		t.Errorf("PopDue(9) = %v, want none", got)
	}
	if got := h.PopDue(40, nil); !slices.Equal(got, []int{10, 30, 30, 40}) {
		t.Errorf("PopDue(40) = %v, want [10 30 30 40]", got)
	}
	if at, _ := h.Next(); at != 50 || h.Len() != 2 {
		t.Errorf("after PopDue(40): Next %d, Len %d, want 50, 2", at, h.Len())
	}
}

// TestHeapOrder pushes random instants and pops them in steps: every
// value comes out once, in order, and the array shrinks once emptied.
func TestHeapOrder(t *testing.T) {
	var h Heap[int64]
	r := rand.New(rand.NewPCG(1, 2))
	var want []int64
	for range 1000 {
		at := r.Int64N(10000)
		want = append(want, at)
		h.Push(at, at)
	}
	slices.Sort(want)
	var got []int64
	for now := int64(0); now < 10000; now += 97 {
		got = h.PopDue(now, got)
	}
	got = h.PopDue(10000, got)
	if !slices.Equal(got, want) {
		t.Fatalf("popped %d values out of order or lost (want %d)", len(got), len(want))
	}
	if h.Len() != 0 || cap(h.items) > 64 {
		t.Errorf("emptied heap: Len %d, cap %d, want 0 and a released array", h.Len(), cap(h.items))
	}
}
