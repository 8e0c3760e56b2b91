// Package timerheap is a min-heap of values due at instants: push one,
// pop those due, read the next instant. The caller owns the clock and the
// lock (a Heap is not safe for concurrent use) and the timer that waits
// for the next instant; resp's WAIT keeps its connections' turns in one.
//
// Like every internal package it imports nothing of the project but
// engine and other internal packages (checked by internal/layers).
package timerheap

// Heap orders values by their instant (any monotonic unit, such as ns
// since an origin), earliest first. The zero Heap is empty and ready.
type Heap[T any] struct {
	items []item[T]
}

type item[T any] struct {
	at int64
	v  T
}

// Len returns the number of values in the heap.
func (h *Heap[T]) Len() int { return len(h.items) }

// Push adds v, due at at. It reports whether v is now the earliest (the
// caller's timer must be moved).
func (h *Heap[T]) Push(at int64, v T) (first bool) {
	h.items = append(h.items, item[T]{at, v})
	i := len(h.items) - 1
	for i > 0 {
		p := (i - 1) / 2
		if h.items[p].at <= at {
			break
		}
		h.items[i], h.items[p] = h.items[p], h.items[i]
		i = p
	}
	return i == 0
}

// Next returns the earliest instant, ok false when the heap is empty.
func (h *Heap[T]) Next() (at int64, ok bool) {
	if len(h.items) == 0 {
		return 0, false
	}
	return h.items[0].at, true
}

// PopDue removes the values due at or before now and appends them to dst,
// earliest first. Once a crowd of values is gone it lets the large array
// go.
func (h *Heap[T]) PopDue(now int64, dst []T) []T {
	for len(h.items) > 0 && h.items[0].at <= now {
		dst = append(dst, h.items[0].v)
		h.pop()
	}
	if cap(h.items) > 64 && len(h.items) < cap(h.items)/4 {
		h.items = append([]item[T](nil), h.items...)
	}
	return dst
}

// pop removes the earliest value.
func (h *Heap[T]) pop() {
	n := len(h.items) - 1
	h.items[0] = h.items[n]
	h.items[n] = item[T]{} // drop the reference
	h.items = h.items[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && h.items[l].at < h.items[m].at {
			m = l
		}
		if r := l + 1; r < n && h.items[r].at < h.items[m].at {
			m = r
		}
		if m == i {
			return
		}
		h.items[i], h.items[m] = h.items[m], h.items[i]
		i = m
	}
}
