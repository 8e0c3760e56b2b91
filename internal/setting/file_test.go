package setting

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSplitLine(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  error
	}{
		{"port 7000", []string{"port", "7000"}, nil},
		{"requirepass \"two words\"", []string{"requirepass", "two words"}, nil},
		{"save ''", []string{"save", ""}, nil},
		{"a\tb  c", []string{"a", "b", "c"}, nil},
		{"requirepass \"open", nil, ErrUnbalancedQuotes},
		// Redis's sdssplitargs: escapes in double quotes, \' in single
		// quotes, a quote opening inside a word, a closing quote ending it.
		{`region-peer-password eu "eu's requirepass"`, []string{"region-peer-password", "eu", "eu's requirepass"}, nil},
		{`a "say \"hi\"" 'it\'s'`, []string{"a", `say "hi"`, "it's"}, nil},
		{`a "t\tn\nr\rb\ba\a\\\x41\x7e\q"`, []string{"a", "t\tn\nr\rb\ba\a\\A~q"}, nil},
		{`a "\x4"`, []string{"a", "x4"}, nil}, // not two hex digits: \x is x
		{`a 'no \n escape'`, []string{"a", `no \n escape`}, nil},
		{`a back\slash it"s a" word`, []string{"a", `back\slash`, "its a", "word"}, nil},
		{`a "" ''`, []string{"a", "", ""}, nil},
		{"a \"x\"\tb", []string{"a", "x", "b"}, nil},
		{`a "x"y`, nil, ErrQuoteFollowed},
		{`a 'x'y`, nil, ErrQuoteFollowed},
		{`a 'open`, nil, ErrUnbalancedQuotes},
		{`a "ends in \"`, nil, ErrUnbalancedQuotes},
		{`a it's`, nil, ErrUnbalancedQuotes},
	}
	for _, tt := range tests {
		got, err := SplitLine(tt.in)
		if !reflect.DeepEqual(got, tt.want) || !errors.Is(err, tt.err) {
			t.Errorf("SplitLine(%q) = %q, %v; want %q, %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

// TestRewrite: lines whose value holds are kept byte for byte, a changed
// one is replaced in place (its last occurrence), new non-default values
// are appended after the header, nothing is removed.
func TestRewrite(t *testing.T) {
	same := func(_, a, b string) bool { return strings.EqualFold(a, b) }
	tests := []struct {
		name   string
		src    string
		values []Value
		want   string
	}{
		{"unchanged", "# top\nport 7000\n\n  # indented comment\nloglevel NOTICE\n",
			[]Value{{Name: "port", Value: "7000"}, {Name: "loglevel", Value: "notice", Default: true}},
			"# top\nport 7000\n\n  # indented comment\nloglevel NOTICE\n"},
		{"in place", "# top\n  timeout 10\nport 7000\n",
			[]Value{{Name: "timeout", Value: "30"}, {Name: "port", Value: "7000"}},
			"# top\n  timeout 30\nport 7000\n"},
		{"last occurrence", "timeout 1\ntimeout 2\n",
			[]Value{{Name: "timeout", Value: "3"}},
			"timeout 1\ntimeout 3\n"},
		{"default kept when named", "timeout 10\n",
			[]Value{{Name: "timeout", Value: "0", Default: true}},
			"timeout 0\n"},
		{"append", "port 7000",
			[]Value{{Name: "port", Value: "7000"}, {Name: "maxclients", Value: "5"}, {Name: "loglevel", Value: "notice", Default: true}, {Name: "requirepass", Value: "two words"}, {Name: "save", Value: ""}},
			"port 7000\n" + RewriteHeader + "\nmaxclients 5\nrequirepass \"two words\"\nsave \"\"\n"},
		{"repeatable unchanged", "metrics-class a a:*\n# keep\nmetrics-class b b:*\n",
			[]Value{{Name: "metrics-class", Value: "a a:* b b:*"}},
			"metrics-class a a:*\n# keep\nmetrics-class b b:*\n"},
		{"repeatable changed: written whole on its last line", "metrics-class a a:*\n# keep\nmetrics-class b b:*\nport 1\n",
			[]Value{{Name: "metrics-class", Value: "b b:*"}},
			"# keep\nmetrics-class \"b b:*\"\nport 1\n"},
		{"header once", "port 1\n" + RewriteHeader + "\nmaxclients 5\n",
			[]Value{{Name: "maxclients", Value: "6"}, {Name: "timeout", Value: "9"}},
			"port 1\n" + RewriteHeader + "\nmaxclients 6\ntimeout 9\n"},
		{"crlf and unknown lines", "port 1\r\nactivedefrag yes\r\nbroken \"quote\r\n",
			[]Value{{Name: "port", Value: "2"}},
			"port 2\r\nactivedefrag yes\r\nbroken \"quote\r\n"},
		{"quotes", "",
			[]Value{{Name: "a", Value: `say "hi"`}, {Name: "b", Value: "#x"}},
			RewriteHeader + "\na \"say \\\"hi\\\"\"\nb \"#x\"\n"},
	}
	for _, tt := range tests {
		got, err := Rewrite([]byte(tt.src), tt.values, same)
		if err != nil || string(got) != tt.want {
			t.Errorf("%s: Rewrite = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}

// TestRewriteRoundTrip: every appended or replaced line reads back as the
// value written.
func TestRewriteRoundTrip(t *testing.T) {
	vals := []string{"plain", "", "two words", "tab\there", `dq"`, "sq'", "#hash", "'lead", `it's "x"`, "line\nbreak", `back\slash`, "\x01\x7f", `eu "eu's requirepass"`}
	var values []Value
	for i, v := range vals {
		values = append(values, Value{Name: "k" + string(rune('a'+i)), Value: v})
	}
	out, err := Rewrite([]byte("ka old\n"), values, func(_, a, b string) bool { return a == b })
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		w, err := SplitLine(l)
		if err != nil {
			t.Fatalf("SplitLine(%q): %v", l, err)
		}
		got[w[0]] = strings.Join(w[1:], " ")
	}
	for _, v := range values {
		if got[v.Name] != v.Value {
			t.Errorf("%s read back as %q, want %q (file %q)", v.Name, got[v.Name], v.Value, out)
		}
	}
}

// TestJoinWords: Quote and JoinWords write any words so that SplitLine
// reads them back (what a list-valued setting's value, written by
// CONFIG GET or CONFIG REWRITE, relies on), and DirectiveValue gives a
// single argument as it is.
func TestJoinWords(t *testing.T) {
	for _, words := range [][]string{
		{"a"},
		{"eu", "eu's requirepass"},
		{"login:*", "global", "us"},
		{"", `"`, "'", `\`, `\x41`, "#", "a b", "\t\r\n\a\b", "\x00\xff", "é"},
	} {
		v := JoinWords(words)
		got, err := SplitLine(v)
		if err != nil || !reflect.DeepEqual(got, words) {
			t.Errorf("SplitLine(JoinWords(%q) = %s) = %q, %v", words, v, got, err)
		}
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"two words"}, "two words"},
		{[]string{"eu", "eu's requirepass"}, `eu "eu's requirepass"`},
		{[]string{"3600", "1", "300", "100"}, "3600 1 300 100"},
	} {
		if got := DirectiveValue(tt.args); got != tt.want {
			t.Errorf("DirectiveValue(%q) = %s, want %s", tt.args, got, tt.want)
		}
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.conf")
	if err := os.WriteFile(real, []byte("old\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.conf")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(link, []byte("new\n")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(real)
	fi, _ := os.Stat(real)
	if err != nil || string(b) != "new\n" || fi.Mode().Perm() != 0o640 {
		t.Errorf("after WriteFileAtomic: %q, %v, mode %v; want \"new\\n\", 0640", b, err, fi.Mode().Perm())
	}
	if l, err := os.Lstat(link); err != nil || l.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symbolic link was replaced: %v, %v", l, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("directory holds %d entries, want 2 (no temporary file left)", len(entries))
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "x.conf"), nil); err == nil {
		t.Error("WriteFileAtomic into a missing directory succeeded")
	}
}
