package waiters

import (
	"strings"
	"testing"
)

func TestRegistry(t *testing.T) {
	l := New[int]()
	k := Key{"k", "a"}
	if _, ok := l.Take(k); ok {
		t.Fatal("Take of an empty registry found a waiter")
	}
	l.Add(k, 1)
	l.Remove(k, 2) // another client's remove leaves it
	if c, ok := l.Take(k); !ok || c != 1 {
		t.Fatalf("Take = %d, %v, want 1, true", c, ok)
	}
	if _, ok := l.Take(k); ok {
		t.Error("a second Take found the waiter again")
	}
	l.Add(k, 1)
	l.Remove(k, 1)
	if _, ok := l.Take(k); ok {
		t.Error("Take found a removed waiter")
	}
}

func TestNewID(t *testing.T) {
	a, b := New[int](), New[int]()
	seen := map[string]bool{}
	for range 100 {
		for _, id := range []string{a.NewID(), b.NewID()} {
			if seen[id] || !strings.HasPrefix(id, "w") {
				t.Fatalf("NewID = %q: repeated, or not starting with w", id)
			}
			seen[id] = true
		}
	}
}
