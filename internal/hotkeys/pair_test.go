package hotkeys

import "testing"

// TestPair checks the pair's recording, the sampler's rate and the
// scaling of a sampled count.
func TestPair(t *testing.T) {
	p := NewPair(10)
	if p.Capacity() != 10 {
		t.Fatalf("Capacity() = %d, want 10", p.Capacity())
	}
	p.Record(1, []byte("a"), false)
	p.Record(1, []byte("a"), true)
	if r, l := p.Requested.Total(), p.Limited.Total(); r != 2 || l != 1 {
		t.Fatalf("totals requested %d, limited %d; want 2, 1", r, l)
	}
	var x Sampler
	picked := 0
	for i := 0; i < 32000; i++ {
		if x.Pick(func() uint64 { return 12345 }) {
			picked++
		}
	}
	if picked < 700 || picked > 1300 {
		t.Errorf("picked %d of 32000, want about 1000", picked)
	}
	if n, e := Scale(100, 2); n != 3200 || e != 2*32+1280 {
		t.Errorf("Scale(100, 2) = %d, %d; want 3200, 1344", n, e)
	}
}
