package setting

import (
	"bytes"
	"fmt"
	"strings"
)

//go:generate sh -c "go run ../../cmd/cellserver --gen-sample-config > ../../deploy/cellserver.conf"

// SampleConf renders deploy/cellserver.conf from Table: every setting, by
// the docs' sections, its help as a comment and its line commented out at
// the default, so that the file loads as the defaults and any line
// uncommented is a valid directive.
func SampleConf() []byte {
	var b bytes.Buffer
	b.WriteString("# cellserver.conf: every setting, commented out at its default.\n" +
		"# Generated from internal/setting's table by `go generate ./internal/setting`\n" +
		"# (or `cellserver --gen-sample-config`); copy it, do not edit it here.\n" +
		"#\n" +
		"# redis.conf syntax: one directive per line, its arguments separated by\n" +
		"# spaces (double or single quotes group words), # starts a comment. Start\n" +
		"# the server with the file first: cellserver /etc/cellserver/cellserver.conf\n" +
		"# [--flag value ...] (flags win). Meanings in docs/configuration.md.\n" +
		"#\n" +
		"# Secrets: keep this file readable by its owner only, or give each\n" +
		"# secret a file of its own (requirepass-file, cluster-secret-file,\n" +
		"# region-peer-password-file). Never pass one as a flag: ps shows it.\n")
	for _, g := range Groups {
		title := strings.ToUpper(g)
		fmt.Fprintf(&b, "\n%s %s %s\n", strings.Repeat("#", 8), title, strings.Repeat("#", max(8, 70-len(title))))
		for i := range Table {
			s := &Table[i]
			if s.Group != g {
				continue
			}
			b.WriteString("\n")
			for _, l := range wrap(s.Help+" ["+s.TypeText()+"]", 74) {
				b.WriteString("# " + l + "\n")
			}
			v := s.Default
			if v == "" {
				v = `""`
			}
			fmt.Fprintf(&b, "# %s %s\n", s.Name, v)
		}
	}
	return b.Bytes()
}

// wrap splits text into lines of at most width bytes, at spaces (a longer
// word stands alone).
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
