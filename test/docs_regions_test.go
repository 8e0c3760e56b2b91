package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDocsRegionsExample replays docs/regions.md's "Configuring three
// regions": us's file as the guide writes it (marked <!-- doc-test:
// region-file -->), and eu's and ap's made from it as the guide says (the
// same policy and weights, each naming itself and the two others, with
// its own password), each region a standalone server on loopback with
// the peers' addresses mapped to those servers. Every region must start
// and its console blocks must answer as the guide shows: the passwords,
// quoted with a space and a quote, reach the links.
func TestDocsRegionsExample(t *testing.T) {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("redis-cli not installed (scripts/test.sh installs it)")
	}
	path := filepath.Join("..", "docs", "regions.md")
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(text), "<!-- doc-test: region-file -->\n```\n")
	usFile, _, ok2 := strings.Cut(rest, "\n```")
	if !ok || !ok2 {
		t.Fatal("docs/regions.md: no block marked <!-- doc-test: region-file -->")
	}
	regions := []string{"us", "eu", "ap"}
	port := map[string]int{}
	for _, r := range regions {
		port[r] = freePort(t)
	}
	addr := func(r string) string { return "127.0.0.1:" + strconv.Itoa(port[r]) }
	servers := map[string]*server{}
	for _, r := range regions {
		conf := filepath.Join(t.TempDir(), r+".conf")
		if err := os.WriteFile(conf, []byte(regionFile(t, usFile, r, addr)), 0o600); err != nil {
			t.Fatal(err)
		}
		s := &server{t: t, Port: port[r], Addr: addr(r), Dir: t.TempDir()}
		s.args = []string{conf, "--port", strconv.Itoa(s.Port), "--dir", s.Dir, "--save", ""}
		t.Cleanup(s.kill)
		s.start()
		servers[r] = s
	}
	ran := 0
	for _, b := range parseConsoleBlocks(t, path) {
		if b.skip {
			continue
		}
		for _, c := range b.cmds {
			if c.args == nil {
				t.Errorf("%s:%d: %q is not a redis-cli command", b.file, c.line, c.text)
				continue
			}
			args, err := mapRegionHosts(c.args, addr)
			if err != nil {
				t.Fatalf("%s:%d: %v", b.file, c.line, err)
			}
			out, err := exec.Command("redis-cli", append([]string{"--no-raw"}, args...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("%s:%d: $ %s: %v\n%s", b.file, c.line, c.text, err, out)
			}
			if err := matchReply(c, string(out)); err != nil {
				t.Errorf("%s:%d: $ %s: %v", b.file, c.line, c.text, err)
			}
			ran++
		}
	}
	if ran < 3 {
		t.Errorf("%d documented commands ran; the guide's console block was not found", ran)
	}
}

// regionFile is the guide's us file made region r's: the region, peer and
// password lines name r and the two others (passwords as the guide writes
// them, "<name>'s requirepass"), every peer's addresses are that region's
// server here, and the other lines (policy, weights, timeouts) are kept
// as they are.
func regionFile(t *testing.T, usFile, r string, addr func(string) string) string {
	t.Helper()
	swap := func(s string) string { // us ↔ r, where the lines name regions
		return regexp.MustCompile(`\b(us|`+r+`)\b`).ReplaceAllStringFunc(s, func(w string) string {
			if w == "us" {
				return r
			}
			return "us"
		})
	}
	var out []string
	for _, l := range strings.Split(usFile, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			out = append(out, l)
			continue
		}
		switch f[0] {
		case "region", "region-peer-password", "requirepass":
			if r != "us" {
				l = swap(l)
			}
		case "region-peer":
			if len(f) != 3 {
				t.Fatalf("region-peer line %q: want NAME ADDRS", l)
			}
			name := f[1]
			if r != "us" {
				name = swap(name)
			}
			l = "region-peer " + name + " " + addr(name)
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n") + "\n"
}

// mapRegionHosts replaces the guide's "-h <region>-N.example.net" with
// that region's server here (and its port; the guide's is Redis's 6379).
func mapRegionHosts(args []string, addr func(string) string) ([]string, error) {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] != "-h" || i+1 == len(args) {
			out = append(out, args[i])
			continue
		}
		r, _, ok := strings.Cut(args[i+1], "-")
		a := addr(r)
		if !ok || a == "127.0.0.1:0" {
			return nil, fmt.Errorf("-h %s: not a host of the guide's regions", args[i+1])
		}
		host, p, _ := strings.Cut(a, ":")
		out = append(out, "-h", host, "-p", p)
		i++
	}
	return out, nil
}
