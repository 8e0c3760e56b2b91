package test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/poll"
	"github.com/cellserver/cellserver/internal/testlog"
)

// The docs' console examples are run against a fresh server and compared
// with their replies line by line, so that a change which breaks an example
// fails here rather than for a reader.
//
// A ```console block holds "$ redis-cli <args>" lines, each followed by the
// reply redis-cli prints (its formatted, tty output). Text after a word
// starting with '#' is a comment for the reader. A value that depends on the
// clock is marked by an HTML comment on the line just before the block,
// invisible once rendered:
//
//	<!-- doc-test: 2.4=0..4000 2.5=0..4000 -->
//
// which lets the last integer of reply line 4 and of line 5 of the block's
// second command be anything from 0 to 4000 (the rest of those lines still
// compares exactly). "<!-- doc-test: skip -->" leaves a block out.

// docBlock is one console block: its commands, their expected replies and
// the ranges allowed for clock-dependent values.
type docBlock struct {
	file string
	line int // of the opening fence
	cmds []docCmd
	skip bool
	// opts are the marker's name=value words (docs_cluster_test.go reads
	// world, leader and kill).
	opts map[string]string
	// sh is set for a ```sh block (parseShellBlocks): its lines, with
	// backslash continuations joined, in cmds[i].text.
	sh bool
}

type docCmd struct {
	line  int      // in the file
	text  string   // as written, after "$ "
	args  []string // redis-cli's arguments
	grep  string   // "| grep PATTERN" after the command: the reply lines kept
	reply []string // expected lines
	// ranges allow a clock- or run-dependent integer of a reply line to be
	// anything in [min, max]: by line (1-based), then by the integer's
	// position on the line (1-based; 0 is the last integer).
	ranges map[int]map[int][2]int64
}

// docMarker reads a "<!-- doc-test: … -->" line.
var docMarker = regexp.MustCompile(`^<!--\s*doc-test:\s*(.*?)\s*-->\s*$`)

// parseConsoleBlocks returns path's console blocks in order.
func parseConsoleBlocks(t *testing.T, path string) []docBlock {
	t.Helper()
	var out []docBlock
	for _, b := range parseDocBlocks(t, path) {
		if !b.sh {
			out = append(out, b)
		}
	}
	return out
}

// parseDocBlocks returns path's console blocks and its unindented ```sh
// blocks, in order.
func parseDocBlocks(t *testing.T, path string) []docBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []docBlock
	var cur *docBlock
	marker := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && (line == "```console" || line == "```sh"):
			cur = &docBlock{file: filepath.Base(path), line: n, sh: line == "```sh", opts: map[string]string{}}
			if err := applyMarker(cur, marker); err != nil {
				t.Fatalf("%s:%d: %v", path, n-1, err)
			}
			marker = ""
		case cur == nil:
			marker = ""
			if m := docMarker.FindStringSubmatch(line); m != nil {
				marker = m[1]
			}
		case line == "```":
			if err := checkRanges(cur); err != nil {
				t.Fatalf("%s:%d: %v", path, cur.line, err)
			}
			blocks = append(blocks, *cur)
			cur = nil
		case cur.sh:
			if k := len(cur.cmds); k > 0 && strings.HasSuffix(cur.cmds[k-1].text, "\\") {
				c := &cur.cmds[k-1]
				c.text = strings.TrimSpace(strings.TrimSuffix(c.text, "\\")) + " " + strings.TrimSpace(line)
				continue
			}
			cur.cmds = append(cur.cmds, docCmd{line: n, text: line})
		case strings.HasPrefix(line, "$ "):
			text := strings.TrimPrefix(line, "$ ")
			c := docCmd{line: n, text: text, ranges: map[int]map[int][2]int64{}}
			if cmdText, pattern, ok := strings.Cut(text, " | grep "); ok {
				text, c.grep = cmdText, strings.TrimSpace(pattern)
			}
			words, err := shellWords(text)
			if err != nil {
				t.Fatalf("%s:%d: %v", path, n, err)
			}
			if len(words) > 0 && words[0] == "redis-cli" {
				c.args = words[1:]
			}
			cur.cmds = append(cur.cmds, c)
		default:
			if len(cur.cmds) == 0 {
				t.Fatalf("%s:%d: reply before any command", path, n)
			}
			c := &cur.cmds[len(cur.cmds)-1]
			c.reply = append(c.reply, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("%s:%d: block never closed", path, cur.line)
	}
	return blocks
}

// rangeSpec reads one range of a marker: cmd.line=min..max, or
// cmd.line#k=min..max for the k-th integer of the line.
var rangeSpec = regexp.MustCompile(`^(\d+)\.(\d+)(?:#(\d+))?=(-?\d+)\.\.(-?\d+)$`)

// optSpec reads a marker's name=value word.
var optSpec = regexp.MustCompile(`^([a-z]+)=(\S+)$`)

// applyMarker records marker's instructions on b (ranges are attached by
// checkRanges once the commands are known).
func applyMarker(b *docBlock, marker string) error {
	if marker == "" {
		return nil
	}
	if strings.HasPrefix(marker, "skip") {
		b.skip = true
		return nil
	}
	for _, f := range strings.Fields(marker) {
		if m := optSpec.FindStringSubmatch(f); m != nil {
			b.opts[m[1]] = m[2]
			continue
		}
		m := rangeSpec.FindStringSubmatch(f)
		if m == nil {
			return fmt.Errorf("doc-test marker %q: want cmd.line=min..max, cmd.line#k=min..max or name=value", f)
		}
		cmd, _ := strconv.Atoi(m[1])
		line, _ := strconv.Atoi(m[2])
		k := 0
		if m[3] != "" {
			k, _ = strconv.Atoi(m[3])
		}
		lo, _ := strconv.ParseInt(m[4], 10, 64)
		hi, _ := strconv.ParseInt(m[5], 10, 64)
		for len(b.cmds) < cmd { // placeholders, filled as commands are read
			b.cmds = append(b.cmds, docCmd{ranges: map[int]map[int][2]int64{}})
		}
		if b.cmds[cmd-1].ranges[line] == nil {
			b.cmds[cmd-1].ranges[line] = map[int][2]int64{}
		}
		b.cmds[cmd-1].ranges[line][k] = [2]int64{lo, hi}
	}
	return nil
}

// checkRanges merges the marker's placeholders with the commands read after
// them and checks that every range names a reply line and an integer that
// exist.
func checkRanges(b *docBlock) error {
	var ph []docCmd
	var cmds []docCmd
	for _, c := range b.cmds {
		if c.text == "" {
			ph = append(ph, c)
		} else {
			cmds = append(cmds, c)
		}
	}
	for i, p := range ph {
		if i >= len(cmds) {
			return fmt.Errorf("doc-test marker names command %d of %d", i+1, len(cmds))
		}
		for l, r := range p.ranges {
			if l < 1 || l > len(cmds[i].reply) {
				return fmt.Errorf("doc-test marker names line %d of command %d, which has %d", l, i+1, len(cmds[i].reply))
			}
			if n := len(lastInt.FindAllString(cmds[i].reply[l-1], -1)); n == 0 || maxKey(r) > n {
				return fmt.Errorf("doc-test marker names integer %d of line %d of command %d, which has %d", maxKey(r), l, i+1, n)
			}
			cmds[i].ranges[l] = r
		}
	}
	b.cmds = cmds
	return nil
}

func maxKey(m map[int][2]int64) int {
	k := 0
	for i := range m {
		k = max(k, i)
	}
	return k
}

// lastInt finds the integers of a reply line.
var lastInt = regexp.MustCompile(`-?\d+`)

// matchReply compares redis-cli's output with the documented reply,
// line by line, allowing the ranges.
func matchReply(c docCmd, got string) error {
	lines := strings.Split(strings.TrimRight(got, "\n"), "\n")
	if got == "" {
		lines = nil
	}
	if len(lines) != len(c.reply) {
		return fmt.Errorf("%d reply lines, the docs show %d:\n%s", len(lines), len(c.reply), got)
	}
	for i, want := range c.reply {
		if err := matchLine(want, lines[i], c.ranges[i+1]); err != nil {
			return fmt.Errorf("line %d: %v", i+1, err)
		}
	}
	return nil
}

// matchLine compares one reply line: equal, except that the integers that
// ranges name (by position, 1-based; 0 is the last) may be anything in
// their range.
func matchLine(want, got string, ranges map[int][2]int64) error {
	if len(ranges) == 0 {
		if got != want {
			return fmt.Errorf("%q, the docs show %q", got, want)
		}
		return nil
	}
	wl, gl := lastInt.FindAllStringIndex(want, -1), lastInt.FindAllStringIndex(got, -1)
	if len(wl) != len(gl) {
		return fmt.Errorf("%q, the docs show %q", got, want)
	}
	wp, gp := 0, 0
	for k := range wl {
		w, g := wl[k], gl[k]
		if got[gp:g[0]] != want[wp:w[0]] {
			return fmt.Errorf("%q, the docs show %q", got, want)
		}
		wv, gv := want[w[0]:w[1]], got[g[0]:g[1]]
		r, ok := ranges[k+1]
		if !ok && k == len(wl)-1 {
			r, ok = ranges[0]
		}
		if !ok {
			if wv != gv {
				return fmt.Errorf("%q, the docs show %q", got, want)
			}
		} else {
			docV, _ := strconv.ParseInt(wv, 10, 64)
			v, _ := strconv.ParseInt(gv, 10, 64)
			if docV < r[0] || docV > r[1] {
				return fmt.Errorf("the docs' own value %d is outside its range %d..%d", docV, r[0], r[1])
			}
			if v < r[0] || v > r[1] {
				return fmt.Errorf("%q: %d is outside %d..%d", got, v, r[0], r[1])
			}
		}
		wp, gp = w[1], g[1]
	}
	if got[gp:] != want[wp:] {
		return fmt.Errorf("%q, the docs show %q", got, want)
	}
	return nil
}

// shellWords splits a command line as a POSIX shell would for the simple
// cases the docs use: blanks separate words, single and double quotes group
// them (backslash escapes inside double quotes), and a word starting with
// '#' starts a comment.
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words, inWord = append(words, w.String()), false
				w.Reset()
			}
		case c == '#' && !inWord:
			return words, nil
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unclosed ' in %q", s)
			}
			w.WriteString(s[i+1 : i+1+j])
			i, inWord = i+1+j, true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				w.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unclosed \" in %q", s)
			}
			inWord = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// TestDocsParser: the parser reads commands, replies, comments and markers,
// and matchReply refuses a changed reply (the doc test can fail).
func TestDocsParser(t *testing.T) {
	md := filepath.Join(t.TempDir(), "x.md")
	text := "<!-- doc-test: 2.2=0..100 -->\n```console\n$ redis-cli SET a \"b c\"   # comment\nOK\n$ redis-cli X 'y z'\n1) (integer) 7\n2) (integer) 50\n```\n"
	if err := os.WriteFile(md, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	b := parseConsoleBlocks(t, md)
	if len(b) != 1 || len(b[0].cmds) != 2 {
		t.Fatalf("blocks = %+v", b)
	}
	c0, c1 := b[0].cmds[0], b[0].cmds[1]
	if strings.Join(c0.args, "|") != "SET|a|b c" || strings.Join(c1.args, "|") != "X|y z" || c1.ranges[2][0] != [2]int64{0, 100} {
		t.Fatalf("parsed %+v %+v", c0, c1)
	}
	for _, tc := range []struct {
		got string
		ok  bool
	}{
		{"1) (integer) 7\n2) (integer) 50\n", true},
		{"1) (integer) 7\n2) (integer) 0\n", true},
		{"1) (integer) 7\n2) (integer) 101\n", false},
		{"1) (integer) 8\n2) (integer) 50\n", false},
		{"1) (integer) 7\n2) (error) 50\n", false},
		{"1) (integer) 7\n", false},
	} {
		if err := matchReply(c1, tc.got); (err == nil) != tc.ok {
			t.Errorf("matchReply(%q) = %v, want ok=%v", tc.got, err, tc.ok)
		}
	}
	// The k-th integer of a line, options, "| grep", and sh blocks with
	// continuation lines.
	text = "<!-- doc-test: world=one leader=7001 1.1#3=0..9 -->\n```console\n$ redis-cli INFO | grep m_n4\nm_n4:a=7,b=5,c=3\n```\n```sh\ncellserver --port 1 \\\n  --dir x &\n```\n"
	if err := os.WriteFile(md, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	b = parseDocBlocks(t, md)
	if len(b) != 2 || b[0].opts["world"] != "one" || b[0].opts["leader"] != "7001" || b[0].cmds[0].grep != "m_n4" || !b[1].sh ||
		len(b[1].cmds) != 1 || b[1].cmds[0].text != "cellserver --port 1 --dir x &" {
		t.Fatalf("blocks = %+v", b)
	}
	for _, tc := range []struct {
		got string
		ok  bool
	}{
		{"m_n4:a=7,b=5,c=3", true},
		{"m_n4:a=7,b=0,c=3", true},
		{"m_n4:a=7,b=10,c=3", false},
		{"m_n4:a=6,b=5,c=3", false},
		{"m_n4:a=7,b=5,c=4", false},
		{"m_n4:a=7,b=5,d=3", false},
		{"m_n4:a=7,b=5", false},
	} {
		if err := matchReply(b[0].cmds[0], tc.got); (err == nil) != tc.ok {
			t.Errorf("matchReply(%q) = %v, want ok=%v", tc.got, err, tc.ok)
		}
	}
}

// docExample reads commands.md's "Example on a fresh key: `CMD` → `REPLY`".
var docExample = regexp.MustCompile("Example on a fresh key: `([^`]+)` → `([^`]+)`")

// TestDocsExamples runs the README's console blocks in order on one fresh
// standalone server, then docs/commands.md's console blocks and every
// "Example on a fresh key" of it, and compares each reply with the docs.
func TestDocsExamples(t *testing.T) {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("redis-cli not installed (scripts/test.sh installs it)")
	}
	s := startServer(t, "--save", "")
	cli := func(args ...string) string {
		out, err := exec.Command("redis-cli", append([]string{"-p", strconv.Itoa(s.Port), "--no-raw"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	ran := 0
	for _, b := range parseConsoleBlocks(t, filepath.Join("..", "README.md")) {
		if b.skip {
			continue
		}
		for _, c := range b.cmds {
			if c.args == nil {
				t.Errorf("%s:%d: %q is not a redis-cli command; mark the block <!-- doc-test: skip -->", b.file, c.line, c.text)
				continue
			}
			if err := matchReply(c, cli(c.args...)); err != nil {
				t.Errorf("%s:%d: $ %s: %v", b.file, c.line, c.text, err)
			}
			ran++
		}
	}
	// docs/commands.md's console blocks (the WAIT section's), in order.
	for _, b := range parseConsoleBlocks(t, filepath.Join("..", "docs", "commands.md")) {
		if b.skip {
			continue
		}
		for _, c := range b.cmds {
			if err := matchReply(c, cli(c.args...)); err != nil {
				t.Errorf("%s:%d: $ %s: %v", b.file, c.line, c.text, err)
			}
			ran++
		}
	}
	cmds, err := os.ReadFile(filepath.Join("..", "docs", "commands.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range docExample.FindAllStringSubmatch(string(cmds), -1) {
		words, err := shellWords(m[1])
		if err != nil {
			t.Fatal(err)
		}
		cli("DEL", words[1]) // fresh key
		out := cli(words...)
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(l)
			got = append(got, f[len(f)-1])
		}
		if strings.Join(got, " ") != m[2] {
			t.Errorf("commands.md: %s → %s, the docs show %s", m[1], strings.Join(got, " "), m[2])
		}
		ran++
	}
	if ran < 10 {
		t.Errorf("only %d documented commands ran; the docs' blocks were not found", ran)
	}
	t.Logf("%d documented commands checked", ran)
}

// TestDocsHTTPExample runs docs/http.md's console blocks ("$ curl -i
// localhost:8080<path>") against examples/httplimit in front of a fresh
// server: the status line must match and every header line the docs show
// must be in the response with that value (curl -i prints more headers
// than the docs show; their order is not compared).
func TestDocsHTTPExample(t *testing.T) {
	blocks := parseConsoleBlocks(t, filepath.Join("..", "docs", "http.md"))
	if len(blocks) == 0 {
		t.Fatal("docs/http.md has no console block")
	}
	s := startServer(t, "--save", "")
	example := filepath.Join(t.TempDir(), "httplimit")
	if out, err := exec.Command("go", "build", "-o", example, "../examples/httplimit").CombinedOutput(); err != nil {
		t.Fatalf("build examples/httplimit: %v\n%s", err, out)
	}
	listen := "127.0.0.1:" + strconv.Itoa(freePort(t))
	cmd := exec.Command(example, "-listen", listen, "-cellserver", s.Addr)
	var logs testlog.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	poll.Until(t, 30*time.Second, func() error {
		c, err := net.Dial("tcp", listen)
		if err != nil {
			return fmt.Errorf("examples/httplimit not listening: %v\n%s", err, logs.String())
		}
		return c.Close()
	})
	for _, b := range blocks {
		if b.skip {
			continue
		}
		for _, c := range b.cmds {
			words, _ := shellWords(c.text)
			if len(words) != 3 || words[0] != "curl" || words[1] != "-i" || !strings.HasPrefix(words[2], "localhost:8080/") {
				t.Errorf("%s:%d: %q is not \"curl -i localhost:8080/<path>\"; mark the block <!-- doc-test: skip -->", b.file, c.line, c.text)
				continue
			}
			resp, err := http.Get("http://" + listen + strings.TrimPrefix(words[2], "localhost:8080"))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if len(c.reply) == 0 {
				t.Errorf("%s:%d: no reply shown", b.file, c.line)
				continue
			}
			if got := resp.Proto + " " + resp.Status; got != c.reply[0] {
				t.Errorf("%s:%d: status %q, the docs show %q", b.file, c.line, got, c.reply[0])
			}
			for _, l := range c.reply[1:] {
				name, want, ok := strings.Cut(l, ": ")
				if !ok {
					t.Errorf("%s:%d: %q is not a header line", b.file, c.line, l)
					continue
				}
				if got := strings.Join(resp.Header.Values(name), ", "); got != want {
					t.Errorf("%s:%d: %s: %q, the docs show %q", b.file, c.line, name, got, want)
				}
			}
		}
	}
}
