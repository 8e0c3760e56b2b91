package setting

import (
	"bytes"
	"fmt"
	"strings"
)

//go:generate sh -c "go run ../../cmd/cellserver --gen-config-docs > ../../docs/configuration.md"

// Markdown renders docs/configuration.md from Table.
func Markdown() []byte {
	var b bytes.Buffer
	b.WriteString("<!-- Generated from internal/setting's table by `go generate ./internal/setting` (or `cellserver --gen-config-docs`); do not edit. -->\n\n")
	b.WriteString("# Configuration\n\n")
	b.WriteString("Every setting is a redis.conf directive, given in a configuration file\n" +
		"(`cellserver cellserver.conf`) and/or as a `--flag` of the same name (flags\n" +
		"win). A yes/no directive given alone as a flag means yes. Settings marked\n" +
		"live can also be changed with `CONFIG SET`; `CONFIG GET` reads them.\n" +
		"Sizes take units (`1k` = 1000, `1kb` = 1024, `mb`, `gb`); durations are Go's\n" +
		"(`500ms`, `3s`).\n\n" +
		"Arguments are quoted as in redis.conf: `\"double quotes\"` group words and take\n" +
		"the escapes `\\\"`, `\\\\`, `\\n`, `\\r`, `\\t`, `\\b`, `\\a` and `\\xHH`; `'single quotes'` take only\n" +
		"`\\'`; a closing quote must end the word. A setting that holds a list of words\n" +
		"(`region-peer-password NAME PASSWORD`, `region-policy`, `limit-override`,\n" +
		"`limit-shadow`, `metrics-class`) reads its value with the same quoting, so that in\n" +
		"a file `region-peer-password eu \"eu's requirepass\"`, as a flag\n" +
		"`--region-peer-password 'eu \"two words\"'` and with CONFIG SET\n" +
		"`CONFIG SET limit-shadow '\"a b*\" c*'` each give a word holding a space.\n\n" +
		"A secret (`requirepass`, `cluster-secret`, `region-peer-password`) given as\n" +
		"a flag stands on the command line, which `ps` and `/debug/pprof/cmdline`\n" +
		"show: give it as a file instead (`requirepass-file`, `cluster-secret-file`,\n" +
		"`region-peer-password-file`; type path), which the server reads at start,\n" +
		"or in the configuration file (docs/operations.md, Secrets in files).\n")
	for _, g := range Groups {
		fmt.Fprintf(&b, "\n## %s\n\n", strings.ToUpper(g[:1])+g[1:])
		b.WriteString("| directive | type | default | live | meaning |\n|---|---|---|---|---|\n")
		for i := range Table {
			s := &Table[i]
			if s.Group != g {
				continue
			}
			def := "(empty)"
			if s.Default != "" {
				def = "`" + s.Default + "`"
			}
			live := "no"
			if s.Live {
				live = "yes"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", s.Name, s.TypeText(), def, live, strings.ReplaceAll(s.Help, "|", `\|`))
		}
	}
	return b.Bytes()
}
