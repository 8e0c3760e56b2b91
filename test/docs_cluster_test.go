package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/poll"
)

// docs/cluster.md is replayed as a reader follows it: its ```sh blocks
// start the nodes they show and run their redis-cli lines, and its console
// blocks are compared with redis-cli's replies, all on free ports instead
// of the guide's. Blocks belong to a world, named by a marker on the first
// block of each ("<!-- doc-test: world=group -->"); a world's blocks run in
// the guide's order on processes of their own, and each world starts from
// nothing. Further marker words, acted on before a console block:
//
//	setup=group      this block starts a new world (named by world=) with
//	                 the first sh block of world "group", the guide's way
//	                 of saying "on a fresh three-node group"
//	leader=7001      the node on the guide's port 7001 leads its group
//	                 (CLUSTER FAILOVER is sent to it when it does not)
//	kill=7003,7004   those nodes are killed (SIGKILL)
//	poll=30          each command is run again until its reply matches,
//	                 for up to 30 s (the guide says to watch for it)
//
// A console command may end in "| grep [-E] PATTERN": redis-cli then
// writes to a pipe and prints raw replies, as it does for a reader, and
// only the lines PATTERN (a Go regexp) matches are compared.
// Indented blocks (steps inside a list) are instructions for a situation
// the guide describes, not replayed; the tests of that situation live
// elsewhere in test/.

// docWorld is the processes one world of a guide runs.
type docWorld struct {
	t     *testing.T
	dir   string
	ports map[string]string // the guide's port → the port used here
	procs map[string]*server
}

// docPorts finds the guide's ports: every --port and --raft-addr port of
// a cellserver line of an sh block.
var docPorts = regexp.MustCompile(`--(?:port|raft-addr|rls-port) (?:[\w.]+:)?(\d+)`)

// newDocWorld maps every port in guidePorts to a free one.
func newDocWorld(t *testing.T, guidePorts []string) *docWorld {
	w := &docWorld{t: t, dir: t.TempDir(), ports: map[string]string{}, procs: map[string]*server{}}
	for _, p := range guidePorts {
		w.ports[p] = strconv.Itoa(freePort(t))
	}
	return w
}

// portWord matches a number that may be one of the guide's ports.
var portWord = regexp.MustCompile(`\b\d{4,5}\b`)

// mapText replaces the guide's ports in s with this world's.
func (w *docWorld) mapText(s string) string {
	return portWord.ReplaceAllStringFunc(s, func(p string) string {
		if m, ok := w.ports[p]; ok {
			return m
		}
		return p
	})
}

// mapArgs maps ports, and puts a relative path (./x) under the world's
// directory.
func (w *docWorld) mapArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = w.mapText(a)
		if strings.HasPrefix(a, "./") {
			out[i] = filepath.Join(w.dir, strings.TrimPrefix(a, "./"))
		}
	}
	return out
}

// cli runs redis-cli with the guide's arguments (mapped), formatting
// replies as it does on a terminal, and returns its output and exit error.
func (w *docWorld) cli(args []string) (string, error) { return w.run(args, true) }

// run is cli, with the raw output redis-cli gives a pipe unless tty.
func (w *docWorld) run(args []string, tty bool) (string, error) {
	args = w.mapArgs(args)
	if tty {
		args = append([]string{"--no-raw"}, args...)
	}
	out, err := exec.Command("redis-cli", args...).CombinedOutput()
	return string(out), err
}

// grpcurl runs a guide's grpcurl command line (mapped): the binary named
// by $GRPCURL (scripts/test.sh installs it), else grpcurl on the PATH.
func (w *docWorld) grpcurl(line string) (string, error) {
	words, err := shellWords(line)
	if err != nil {
		return "", err
	}
	bin := os.Getenv("GRPCURL")
	if bin == "" {
		if bin, err = exec.LookPath("grpcurl"); err != nil {
			return "", err
		}
	}
	out, err := exec.Command(bin, w.mapArgs(words[1:])...).CombinedOutput()
	return string(out), err
}

// waitLine reads the guide's bounded wait: a redis-cli command tried up to
// N times, S seconds apart, until its output holds PATTERN. An unbounded
// loop (until …; do …; done) is not a line this test runs: a reader's
// script would hang on it when a node never comes up.
var waitLine = regexp.MustCompile(`^for i in \$\(seq (\d+)\); do (redis-cli .*?)(?: 2>/dev/null)? \| grep -q (\S+) && break; sleep ([\d.]+); done$`)

// runShell runs an sh block's lines in order, as a shell runs a script: a
// process started with & is not waited for, so a command that needs it
// must wait itself (waitLine). Between blocks the reader pauses: the
// processes the block started must answer PING before the next block.
func (w *docWorld) runShell(b docBlock) {
	t := w.t
	t.Helper()
	var started []*server
	defer func() {
		for _, s := range started {
			s.waitReady()
		}
	}()
	for _, c := range b.cmds {
		line := strings.TrimSpace(c.text)
		where := fmt.Sprintf("%s:%d: %s", b.file, c.line, line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if m := waitLine.FindStringSubmatch(line); m != nil {
			words, err := shellWords(m[2])
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			// The guide's bound is for an idle machine; a loaded one is
			// given at least 60 s.
			tries, _ := strconv.Atoi(m[1])
			every, _ := strconv.ParseFloat(m[4], 64)
			bound := max(time.Duration(float64(tries)*every*float64(time.Second)), 60*time.Second)
			poll.Until(t, bound, func() error {
				out, _ := w.cli(words[1:])
				if !strings.Contains(out, m[3]) {
					return fmt.Errorf("%s: %q never appeared; last output:\n%s", where, m[3], out)
				}
				return nil
			})
			continue
		}
		words, err := shellWords(line)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		switch {
		case len(words) > 1 && words[0] == "cellserver" && words[len(words)-1] == "&":
			guideArgs := words[1 : len(words)-1]
			guidePort := "6379"
			if i := indexOf(guideArgs, "--port"); i >= 0 && i+1 < len(guideArgs) {
				guidePort = guideArgs[i+1]
			} else {
				// Redis's default port, which this machine's tests may use
				// for something else: a free one.
				w.ports[guidePort] = strconv.Itoa(freePort(t))
				guideArgs = append([]string{"--port", guidePort}, guideArgs...)
			}
			if indexOf(guideArgs, "--dir") < 0 {
				guideArgs = append([]string{"--dir", "."}, guideArgs...)
			}
			args := w.mapArgs(guideArgs)
			port := w.mapText(guidePort)
			s := &server{t: t, Port: atoi(t, port), Addr: "127.0.0.1:" + port, args: args}
			t.Cleanup(s.kill)
			s.launch()
			started = append(started, s)
			w.procs[guidePort] = s
		case len(words) > 0 && words[0] == "redis-cli":
			out, err := w.cli(words[1:])
			if err != nil || strings.HasPrefix(out, "(error)") {
				t.Fatalf("%s: %v\n%s", where, err, out)
			}
			t.Logf("%s:%d: %s\n%s", b.file, c.line, line, strings.TrimRight(out, "\n"))
		default:
			t.Fatalf("%s: not a line this test can run (cellserver … &, redis-cli …, or the guide's bounded wait: for i in $(seq N); do redis-cli … | grep -q PATTERN && break; sleep S; done); mark the block <!-- doc-test: skip -->", where)
		}
	}
}

func indexOf(words []string, w string) int {
	for i, x := range words {
		if x == w {
			return i
		}
	}
	return -1
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// prepare acts on a console block's leader= and kill= words.
func (w *docWorld) prepare(b docBlock) {
	t := w.t
	t.Helper()
	if p := b.opts["leader"]; p != "" {
		poll.Until(t, 60*time.Second, func() error {
			out, _ := w.cli([]string{"-p", p, "ROLE"})
			if strings.HasPrefix(out, `1) "master"`) {
				return nil
			}
			out, err := w.cli([]string{"-p", p, "CLUSTER", "FAILOVER"})
			return fmt.Errorf("%s:%d: the node on the guide's port %s does not lead yet (CLUSTER FAILOVER: %v %s)", b.file, b.line, p, err, out)
		})
		// A follower learns a new leader's address from its first
		// contact, a moment after the election: wait until every node
		// that answers names a leader (ROLE's second line not empty).
		poll.Until(t, 60*time.Second, func() error {
			for q := range w.procs {
				out, err := w.cli([]string{"-p", q, "ROLE"})
				if err != nil || !strings.HasPrefix(out, `1) "slave"`) {
					continue // the leader, or a node not running
				}
				if strings.Contains(out, `2) ""`) {
					return fmt.Errorf("%s:%d: the node on the guide's port %s does not name its leader yet", b.file, b.line, q)
				}
			}
			return nil
		})
	}
	if ps := b.opts["kill"]; ps != "" {
		for _, p := range strings.Split(ps, ",") {
			s := w.procs[p]
			if s == nil {
				t.Fatalf("%s:%d: kill=%s: no node on the guide's port %s", b.file, b.line, p, p)
			}
			s.kill()
		}
	}
}

// runConsole runs a console block's commands and compares their replies.
func (w *docWorld) runConsole(b docBlock) int {
	t := w.t
	t.Helper()
	w.prepare(b)
	ran := 0
	for _, c := range b.cmds {
		if c.args == nil && !strings.HasPrefix(c.text, "grpcurl ") {
			t.Errorf("%s:%d: %q is not a redis-cli or grpcurl command; mark the block <!-- doc-test: skip -->", b.file, c.line, c.text)
			continue
		}
		want := c
		want.reply = make([]string, len(c.reply))
		for i, l := range c.reply {
			want.reply[i] = w.mapText(l)
		}
		var grep *regexp.Regexp
		if c.grep != "" {
			words, err := shellWords(c.grep)
			if err != nil || len(words) == 0 {
				t.Fatalf("%s:%d: grep %q: %v", b.file, c.line, c.grep, err)
			}
			if grep, err = regexp.Compile(words[len(words)-1]); err != nil {
				t.Fatalf("%s:%d: grep %q: %v", b.file, c.line, c.grep, err)
			}
		}
		check := func() error {
			var out string
			var err error
			if c.args == nil {
				out, err = w.grpcurl(c.text)
			} else {
				out, err = w.run(c.args, grep == nil)
			}
			if err != nil {
				return fmt.Errorf("%v\n%s", err, out)
			}
			if grep != nil {
				var kept []string
				for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
					if l = strings.TrimRight(l, "\r"); grep.MatchString(l) {
						kept = append(kept, l)
					}
				}
				out = strings.Join(kept, "\n")
			}
			return matchReply(want, out)
		}
		if secs := b.opts["poll"]; secs != "" {
			poll.Until(t, time.Duration(atoi(t, secs))*time.Second, func() error {
				if err := check(); err != nil {
					return fmt.Errorf("%s:%d: $ %s: %v", b.file, c.line, c.text, err)
				}
				return nil
			})
		} else if err := check(); err != nil {
			t.Errorf("%s:%d: $ %s: %v", b.file, c.line, c.text, err)
		}
		ran++
	}
	return ran
}

// TestDocsClusterExamples replays docs/cluster.md on fresh processes.
func TestDocsClusterExamples(t *testing.T) {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("redis-cli not installed (scripts/test.sh installs it)")
	}
	worlds, ran := replayGuide(t, filepath.Join("..", "docs", "cluster.md"), nil)
	if worlds < 2 || ran < 8 {
		t.Errorf("%d worlds, %d blocks and commands run: the guide's blocks were not found", worlds, ran)
	}
}

// TestDocsEnvoyExample replays docs/envoy.md's grpcurl recipe: the guide's
// "edge" rules (its first yaml block) in ./rls, the server started as the
// guide starts it, and every grpcurl reply compared with the guide's.
// grpcurl is required when $GRPCURL names it (scripts/test.sh).
func TestDocsEnvoyExample(t *testing.T) {
	if os.Getenv("GRPCURL") == "" {
		if _, err := exec.LookPath("grpcurl"); err != nil {
			t.Skip("grpcurl not installed (scripts/test.sh installs it)")
		}
	}
	path := filepath.Join("..", "docs", "envoy.md")
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(text), "```yaml\ndomain: edge\n")
	rules, _, ok2 := strings.Cut(rest, "\n```")
	if !ok || !ok2 {
		t.Fatal("docs/envoy.md: no yaml block of the edge domain")
	}
	worlds, ran := replayGuide(t, path, func(w *docWorld) {
		dir := filepath.Join(w.dir, "rls")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			w.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "edge.yaml"), []byte("domain: edge\n"+rules+"\n"), 0o644); err != nil {
			w.t.Fatal(err)
		}
	})
	if worlds < 1 || ran < 3 {
		t.Errorf("%d worlds, %d blocks and commands run: the guide's recipe was not found", worlds, ran)
	}
}

// replayGuide runs the guide at path world by world (see the top of this
// file), calling prepare (when not nil) on each fresh world first, and
// returns how many worlds and how many blocks and commands ran.
func replayGuide(t *testing.T, path string, prepare func(*docWorld)) (int, int) {
	t.Helper()
	blocks := parseDocBlocks(t, path)
	var guidePorts []string
	seen := map[string]bool{}
	for _, b := range blocks {
		if !b.sh {
			continue
		}
		for _, c := range b.cmds {
			for _, m := range docPorts.FindAllStringSubmatch(c.text, -1) {
				if !seen[m[1]] {
					seen[m[1]] = true
					guidePorts = append(guidePorts, m[1])
				}
			}
		}
	}
	var worlds []string
	byWorld := map[string][]docBlock{}
	world := ""
	for _, b := range blocks {
		if b.skip {
			continue
		}
		if w := b.opts["world"]; w != "" {
			world = w
		}
		if world == "" {
			t.Fatalf("%s:%d: a block before any world=NAME marker", b.file, b.line)
		}
		if byWorld[world] == nil {
			worlds = append(worlds, world)
		}
		byWorld[world] = append(byWorld[world], b)
	}
	ran := 0
	for _, name := range worlds {
		t.Run(name, func(t *testing.T) {
			w := newDocWorld(t, guidePorts)
			if prepare != nil {
				prepare(w)
			}
			if from := byWorld[name][0].opts["setup"]; from != "" {
				i := slices.IndexFunc(byWorld[from], func(b docBlock) bool { return b.sh })
				if i < 0 {
					t.Fatalf("setup=%s: world %s has no sh block", from, from)
				}
				w.runShell(byWorld[from][i])
			}
			for _, b := range byWorld[name] {
				if b.sh {
					w.runShell(b)
					ran++
				} else {
					ran += w.runConsole(b)
				}
			}
		})
	}
	return len(worlds), ran
}
