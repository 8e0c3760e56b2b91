package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

// TestUsageOutput: an unknown flag costs one line that points to --help,
// not the whole usage; --help spells every directive with two dashes, as
// the docs do.
func TestUsageOutput(t *testing.T) {
	t.Run("unknown flag", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		err := run([]string{"--cluster-enabled", "yes"}, &stdout, &stderr)
		if err == nil {
			t.Fatal("an unknown flag was accepted")
		}
		if stderr.Len() != 0 || stdout.Len() != 0 {
			t.Errorf("unknown flag printed %d+%d bytes besides the error, want none:\n%s%s", stdout.Len(), stderr.Len(), stdout.String(), stderr.String())
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") || !strings.Contains(msg, "cluster-enabled") || !strings.Contains(msg, "--help") {
			t.Errorf("error = %q, want one line naming the flag and pointing to --help", msg)
		}
	})
	t.Run("help", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		if err := run([]string{"--help"}, &stdout, &stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("--help: %v", err)
		}
		out := stdout.String() + stderr.String()
		for _, want := range []string{"\n  --appendfsync value\n", "\n  --bootstrap\n", "\n  --dir value\n", "\n  --version\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("--help lacks %q:\n%s", want, out)
			}
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "  -") && !strings.HasPrefix(line, "  --") {
				t.Errorf("--help line %q has a single dash", line)
			}
		}
	})
}
