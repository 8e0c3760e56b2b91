package setting

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestSampleConfUpToDate fails when deploy/cellserver.conf differs from
// what the table generates: every setting of the table, and no other.
func TestSampleConfUpToDate(t *testing.T) {
	got, err := os.ReadFile("../../deploy/cellserver.conf")
	if err != nil {
		t.Fatalf("read deploy/cellserver.conf: %v (generate it with `go generate ./internal/setting`)", err)
	}
	if !bytes.Equal(got, SampleConf()) {
		t.Errorf("deploy/cellserver.conf is out of date with the settings table: run `go generate ./internal/setting`")
	}
	for i := range Table {
		if !bytes.Contains(got, []byte("\n# "+Table[i].Name+" ")) {
			t.Errorf("deploy/cellserver.conf has no line for %s", Table[i].Name)
		}
	}
}

func TestWrap(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want string
	}{
		{"a bb ccc dddd", "a bb|ccc|dddd"},
		{"averyveryverylongword b", "averyveryverylongword|b"},
		{"", ""},
	} {
		if got := strings.Join(wrap(tt.in, 5), "|"); got != tt.want {
			t.Errorf("wrap(%q, 5) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
