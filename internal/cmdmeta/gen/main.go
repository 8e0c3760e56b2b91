// Command gen writes resp's command metadata (commands_gen.go) from the
// JSON files of resp/commands/. resp runs it with `go generate ./resp`:
//
//	go run ../internal/cmdmeta/gen -dir commands -out commands_gen.go
//
// A file that does not decode or check is reported with its path and
// field, and nothing is written.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/cellserver/cellserver/internal/cmdmeta"
)

func main() {
	dir := flag.String("dir", "commands", "directory of the command JSON files")
	out := flag.String("out", "commands_gen.go", "Go file to write")
	flag.Parse()
	if err := run(*dir, *out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(dir, out string) error {
	cmds, err := cmdmeta.Load(os.DirFS("."), dir)
	if err != nil {
		return err
	}
	src, err := cmdmeta.Generate(cmds)
	if err != nil {
		return err
	}
	return os.WriteFile(out, src, 0o644)
}
