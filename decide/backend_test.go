package decide

import (
	"testing"
	"unsafe"
)

// TestLocalStripeLine pins the transaction locks' padding: one cache line
// each, so that loops taking different stripes share no line.
func TestLocalStripeLine(t *testing.T) {
	if got := unsafe.Sizeof(txStripe{}); got != 64 {
		t.Errorf("sizeof(txStripe) = %d, want 64", got)
	}
}
