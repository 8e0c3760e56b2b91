package rls

import "testing"

// TestWatchWaitsForStillFiles: the watcher loads a change only once the
// files held still for a whole check, so a file caught while being written
// (which may parse, cut short) is not loaded; what is loaded is the file
// as it stands once complete.
func TestWatchWaitsForStillFiles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "d.yaml", limitFile(5))
	h := newHarness(t, dir, Options{})

	writeFile(t, dir, "d.yaml", limitFile(7)) // a write in progress
	if h.svc.reloadIfChanged() {
		t.Fatal("a change seen for the first time was loaded at once")
	}
	writeFile(t, dir, "d.yaml", limitFile(11)+"# complete now\n") // still changing
	if h.svc.reloadIfChanged() {
		t.Fatal("a change still in progress was loaded")
	}
	if got := h.currentLimit(t); got != 5 {
		t.Fatalf("limit while the file changes = %d, want 5 (the rules in force)", got)
	}
	if !h.svc.reloadIfChanged() { // held still for a check
		t.Fatal("a file that held still was not loaded")
	}
	if got := h.currentLimit(t); got != 11 {
		t.Fatalf("limit = %d, want 11", got)
	}
	if h.svc.reloadIfChanged() {
		t.Fatal("an unchanged directory was loaded again")
	}
}
