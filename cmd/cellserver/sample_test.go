package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestSampleConfLoads: deploy/cellserver.conf loads as the defaults, and
// with every directive line uncommented it still does: each line it shows
// is a valid directive at the setting's default.
func TestSampleConfLoads(t *testing.T) {
	src, err := os.ReadFile("../../deploy/cellserver.conf")
	if err != nil {
		t.Fatal(err)
	}
	var uncommented []string
	n := 0
	lines := strings.Split(string(src), "\n")
	for i, l := range lines {
		// A setting's block: its help, then its line, then a blank line.
		last := i+1 == len(lines) || lines[i+1] == ""
		if f := strings.Fields(strings.TrimPrefix(l, "# ")); last && strings.HasPrefix(l, "# ") && len(f) > 1 && lookupDirective(f[0]) != nil {
			l = strings.TrimPrefix(l, "# ")
			n++
		}
		uncommented = append(uncommented, l)
	}
	if n != len(directives) {
		t.Errorf("%d directive lines in the sample, want one per setting (%d)", n, len(directives))
	}
	def := DefaultConfig()
	for name, text := range map[string]string{"as shipped": string(src), "uncommented": strings.Join(uncommented, "\n")} {
		cfg, _, err := parseArgs([]string{writeFile(t, text)}, &bytes.Buffer{})
		if err == nil {
			err = cfg.Validate()
		}
		if err != nil {
			t.Errorf("sample %s: %v", name, err)
			continue
		}
		for _, d := range directives {
			if got, want := canonical(d, &cfg), canonical(d, &def); got != want {
				t.Errorf("sample %s: %s = %q, want the default %q", name, d.name, got, want)
			}
		}
	}
}
