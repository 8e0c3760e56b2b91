package resp

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/decide"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata/ from what the server answers")

// TestCommandRepliesGolden compares, byte for byte, what COMMAND, COMMAND
// INFO, COMMAND DOCS, COMMAND COUNT/LIST and every container's HELP answer
// in RESP2 and RESP3 with testdata/command-resp<N>.golden: the command
// metadata moved from Go builders to resp/commands/*.json, and these
// replies must not change unless the golden files are regenerated on
// purpose (`go test ./resp -run TestCommandRepliesGolden -update`).
func TestCommandRepliesGolden(t *testing.T) {
	cfg, store, clock := testBase(t)
	srv, err := NewServer(cfg, decide.NewLocal(store, clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	// Every command the docs list: the raft and region commands too (their
	// handlers are not called here).
	RegisterCluster(srv, nil)
	RegisterRegions(srv, nil)
	ts := serveTest(t, srv, store, clock)

	var containers []string
	for _, cmd := range srv.Commands() {
		if len(cmd.Subcommands) > 0 {
			containers = append(containers, strings.ToUpper(cmd.Name)+" HELP")
		}
	}
	requests := append([]string{
		"COMMAND", "COMMAND COUNT", "COMMAND LIST", "COMMAND DOCS",
		"COMMAND INFO", "COMMAND INFO cl.throttle client|setname nope migrate",
		"COMMAND DOCS cl.throttle config|set nope",
	}, containers...)
	for _, proto := range []int{2, 3} {
		rc := ts.raw(t)
		if proto == 3 {
			rc.send(t, "HELLO 3\r\n")
			readReply(t, rc.r)
		}
		var got bytes.Buffer
		for _, req := range requests {
			rc.send(t, req+"\r\n")
			fmt.Fprintf(&got, "> %s\n", req)
			got.Write(readReply(t, rc.r))
			got.WriteString("\n")
		}
		path := filepath.Join("testdata", fmt.Sprintf("command-resp%d.golden", proto))
		if *updateGolden {
			if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("read %s: %v (create it with -update)", path, err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			g, w := got.String(), string(want)
			i := 0
			for i < len(g) && i < len(w) && g[i] == w[i] {
				i++
			}
			t.Errorf("RESP%d: replies differ from %s at byte %d:\n got  …%q…\n want …%q…", proto, path, i, excerpt(g, i), excerpt(w, i))
		}
	}
}

func excerpt(s string, i int) string {
	lo, hi := max(i-80, 0), min(i+80, len(s))
	return s[lo:hi]
}

// readReply reads one whole RESP2 or RESP3 reply and returns its bytes.
func readReply(t *testing.T, r *bufio.Reader) []byte {
	t.Helper()
	var out []byte
	var read func()
	read = func() {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read reply: %v (after %q)", err, out)
		}
		out = append(out, l...)
		body := strings.TrimSuffix(l[1:], "\r\n")
		n, _ := strconv.Atoi(body)
		switch l[0] {
		case '$', '=', '!':
			if n < 0 {
				return
			}
			b := make([]byte, n+2)
			if _, err := io.ReadFull(r, b); err != nil {
				t.Fatalf("read bulk: %v", err)
			}
			out = append(out, b...)
		case '*', '~', '>':
			for i := 0; i < n; i++ {
				read()
			}
		case '%':
			for i := 0; i < 2*n; i++ {
				read()
			}
		}
	}
	read()
	return out
}
