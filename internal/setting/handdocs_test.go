package setting

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// handWritten are the docs whose tables of settings are written by hand,
// with more to say than docs/configuration.md: their names, defaults and
// live columns must still agree with the table.
var handWritten = []string{"../../docs/operations.md", "../../docs/cluster.md", "../../README.md"}

var (
	codeSpan = regexp.MustCompile("`([^`]+)`")
	plainVal = regexp.MustCompile("^`?([A-Za-z0-9.]+)`?$")
)

// TestHandWrittenTablesAgree fails when a table of settings in the
// hand-written docs names a setting the table lacks, or states another
// default or live flag than the table's.
func TestHandWrittenTablesAgree(t *testing.T) {
	for _, path := range handWritten {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range tableProblems(f) {
			t.Errorf("%s:%s", path, p)
		}
		f.Close()
	}
}

func TestTableProblems(t *testing.T) {
	doc := "text\n\n" +
		"| directive | default | live | meaning |\n|---|---|---|---|\n" +
		"| `maxclients` | `10000` | yes | fine |\n" +
		"| `timeout` | `5` | no | wrong default and live |\n" +
		"| `no-such-thing` | | | gone |\n\n" +
		"| flag | default | meaning |\n|---|---|---|\n" +
		"| `--join host:port`, `--bootstrap yes` | (none) | prose default |\n" +
		"| `--raft-max-batch` | 512 | wrong |\n\n" +
		"| metric | default |\n|---|---|\n| `not_a_setting` | 1 |\n"
	want := []string{
		`6: timeout's default is written "5", the table says "0"`,
		`6: timeout is written live="no", the table says "yes"`,
		`7: "no-such-thing" is not a setting`,
		`12: raft-max-batch's default is written "512", the table says "1024"`,
	}
	if got := tableProblems(strings.NewReader(doc)); !slices.Equal(got, want) {
		t.Errorf("tableProblems = %q\nwant %q", got, want)
	}
}

// tableProblems checks the tables of settings in a markdown text: those
// whose header's first column is "directive" or "flag". Each problem starts
// with its line number.
func tableProblems(r io.Reader) []string {
	var problems []string
	var header []string
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if !strings.HasPrefix(text, "|") {
			header = nil
			continue
		}
		cells := splitRow(text)
		switch {
		case header == nil:
			header = cells
			continue
		case strings.HasPrefix(cells[0], "---"), header[0] != "directive" && header[0] != "flag":
			continue
		}
		for _, name := range rowNames(cells[0]) {
			s := Lookup(name)
			if s == nil {
				problems = append(problems, fmt.Sprintf("%d: %q is not a setting", line, name))
				continue
			}
			for i := 1; i < len(header) && i < len(cells); i++ {
				if p := cellProblem(s, header[i], cells[i]); p != "" {
					problems = append(problems, fmt.Sprintf("%d: %s", line, p))
				}
			}
		}
	}
	return problems
}

func splitRow(text string) []string {
	parts := strings.Split(strings.Trim(text, "|"), "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// rowNames reads the settings a row's first cell names: "`--join
// host:port`", "`--tls-replication yes`, `--tls-cluster yes`", "`timeout`".
func rowNames(cell string) []string {
	var names []string
	for _, m := range codeSpan.FindAllStringSubmatch(cell, -1) {
		names = append(names, strings.TrimPrefix(strings.Fields(m[1])[0], "--"))
	}
	return names
}

// cellProblem compares a default or live cell with s; prose defaults
// ("(none)", "the listen addresses") are not compared.
func cellProblem(s *Spec, column, cell string) string {
	switch column {
	case "default":
		if m := plainVal.FindStringSubmatch(cell); m != nil && !strings.EqualFold(m[1], s.Default) {
			return fmt.Sprintf("%s's default is written %q, the table says %q", s.Name, m[1], s.Default)
		}
	case "live":
		if want := map[bool]string{true: "yes", false: "no"}[s.Live]; cell != want {
			return fmt.Sprintf("%s is written live=%q, the table says %q", s.Name, cell, want)
		}
	}
	return ""
}
