package test

import "testing"

// TestFreePortNeverRepeats: the harness never hands out one port twice in
// a test process. A port is closed as soon as it is found free and a
// cluster test draws a dozen before any server binds one, so a repeated
// draw made two members of one test collide (bind: address already in
// use). 1000 draws from 22,000 ports repeat about 20 times by chance.
func TestFreePortNeverRepeats(t *testing.T) {
	seen := map[int]bool{}
	for range 1000 {
		p := freePort(t)
		if seen[p] {
			t.Fatalf("freePort handed out %d twice", p)
		}
		seen[p] = true
	}
}
