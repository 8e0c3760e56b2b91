package setting

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// This file is the configuration file's syntax, redis.conf's: one directive
// per line, its arguments separated by spaces or tabs, a line starting with
// # a comment. Quotes group words as Redis's sdssplitargs reads them:
// "double quotes" take the escapes \" \\ \n \r \t \b \a and \xHH,
// 'single quotes' only \'; a quote may open inside a word (a"b c" is
// "ab c"), and a closing quote must end the word. SplitLine reads a line,
// Quote and JoinWords write words it reads back; Rewrite writes values
// back into a file's text (CONFIG REWRITE) and WriteFileAtomic replaces
// the file. A list-valued setting (region-peer-password NAME PASSWORD,
// limit-override, ...) reads its value with SplitLine too, so a flag or
// CONFIG SET value quotes a word the way a file line does.

// ErrUnbalancedQuotes is returned by SplitLine for a quote never closed.
var ErrUnbalancedQuotes = errors.New("unbalanced quotes")

// ErrQuoteFollowed is returned by SplitLine for a closing quote followed
// by something other than a space or the end of the line.
var ErrQuoteFollowed = errors.New("a closing quote must be followed by a space or the end of the line")

// SplitLine splits a directive line (trimmed, not a comment), or a
// list-valued setting's value, into words.
func SplitLine(s string) ([]string, error) {
	var words []string
	for i := 0; ; {
		for i < len(s) && isBlank(s[i]) {
			i++
		}
		if i == len(s) {
			return words, nil
		}
		var w strings.Builder
		inDouble, inSingle := false, false
	word:
		for ; ; i++ {
			switch {
			case inDouble:
				switch {
				case i == len(s):
					return nil, ErrUnbalancedQuotes
				case s[i] == '\\' && i+3 < len(s) && s[i+1] == 'x' && isHex(s[i+2]) && isHex(s[i+3]):
					w.WriteByte(unhex(s[i+2])<<4 | unhex(s[i+3]))
					i += 3
				case s[i] == '\\' && i+1 < len(s):
					i++
					w.WriteByte(unescape(s[i]))
				case s[i] == '"':
					if i+1 < len(s) && !isBlank(s[i+1]) {
						return nil, ErrQuoteFollowed
					}
					i++
					break word
				default:
					w.WriteByte(s[i])
				}
			case inSingle:
				switch {
				case i == len(s):
					return nil, ErrUnbalancedQuotes
				case s[i] == '\\' && i+1 < len(s) && s[i+1] == '\'':
					i++
					w.WriteByte('\'')
				case s[i] == '\'':
					if i+1 < len(s) && !isBlank(s[i+1]) {
						return nil, ErrQuoteFollowed
					}
					i++
					break word
				default:
					w.WriteByte(s[i])
				}
			case i == len(s) || isBlank(s[i]):
				break word
			case s[i] == '"':
				inDouble = true
			case s[i] == '\'':
				inSingle = true
			default:
				w.WriteByte(s[i])
			}
		}
		words = append(words, w.String())
	}
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// unescape is the byte a backslash escape inside double quotes stands for.
func unescape(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'b':
		return '\b'
	case 'a':
		return '\a'
	}
	return c
}

// Quote writes w as one word SplitLine reads back: as it is when it needs
// no quotes, else in double quotes with escapes (as Redis's sdscatrepr).
func Quote(w string) string {
	plain := w != "" && w[0] != '#' // a word that looks like a comment is quoted too
	for i := 0; i < len(w) && plain; i++ {
		c := w[i]
		plain = c > ' ' && c < 0x7f && c != '"' && c != '\''
	}
	if plain {
		return w
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(w); i++ {
		switch c := w[i]; c {
		case '\\', '"':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\a':
			b.WriteString(`\a`)
		case '\b':
			b.WriteString(`\b`)
		default:
			if c < ' ' || c == 0x7f {
				fmt.Fprintf(&b, `\x%02x`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// JoinWords writes words as one value SplitLine splits back into them:
// each Quote'd, separated by a space.
func JoinWords(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = Quote(w)
	}
	return strings.Join(q, " ")
}

// DirectiveValue is the value a file line's arguments give a setting, as
// a --flag's text: a single argument as it is (requirepass "two words" is
// the password "two words"), several joined by JoinWords, so that a
// list-valued setting, which splits its value with SplitLine, reads the
// same words (region-peer-password eu "eu's requirepass" is the pair eu,
// "eu's requirepass").
func DirectiveValue(args []string) string {
	if len(args) == 1 {
		return args[0]
	}
	return JoinWords(args)
}

// Value is one setting's current value for Rewrite.
type Value struct {
	Name  string // the directive, lower case
	Value string // as a configuration file writes it (a --flag's text)
	// Default reports whether Value is the setting's default: a default
	// is not appended to a file that does not name the setting.
	Default bool
}

// RewriteHeader introduces the lines Rewrite appends, as Redis's does.
const RewriteHeader = "# Generated by CONFIG REWRITE"

// Rewrite returns src, a configuration file's text, with values written
// into it the way Redis's CONFIG REWRITE does: comments, blank lines, order
// and every line whose value still holds are kept byte for byte; the last
// line naming a setting whose value changed is replaced in place (an
// earlier line of the same name is overridden by it, and kept); a setting
// the file does not name is appended, after RewriteHeader, only when its
// value is not the default. No line is removed, but for a Repeatable
// setting, whose lines add up: its value is all its lines, and a change is
// written whole on the last of them, the others removed (as Redis does).
// same reports whether the text a line gives a setting means value (512mb
// and 536870912, say); a line that does not parse, or names no setting in
// values, is left alone.
func Rewrite(src []byte, values []Value, same func(name, fileValue, value string) bool) ([]byte, error) {
	lines := splitLines(src)
	last := map[string]int{}       // directive → index of its last line
	every := map[string][]int{}    // a repeatable directive → its lines
	given := map[string][]string{} // a repeatable directive → its lines' values
	for i, l := range lines {
		text := strings.TrimSpace(strings.TrimRight(l, "\r\n"))
		if text == "" || text[0] == '#' {
			continue
		}
		words, err := SplitLine(text)
		if err != nil || len(words) == 0 {
			continue
		}
		name := strings.ToLower(words[0])
		last[name] = i
		if s := Lookup(name); s != nil && s.Repeatable {
			every[name] = append(every[name], i)
			given[name] = append(given[name], strings.Join(words[1:], " "))
		}
	}
	drop := map[int]bool{} // earlier lines of a repeatable directive rewritten
	var appended []string
	for _, v := range values {
		line, err := directiveLine(v.Name, v.Value)
		if err != nil {
			return nil, err
		}
		i, named := last[v.Name]
		if !named {
			if !v.Default {
				appended = append(appended, line+"\n")
			}
			continue
		}
		text := strings.TrimSpace(strings.TrimRight(lines[i], "\r\n"))
		words, _ := SplitLine(text) // parsed above
		fileValue := strings.Join(words[1:], " ")
		if g, ok := given[v.Name]; ok {
			// The lines add up: the value is all of them. A change is
			// written whole on the last line, the earlier ones removed
			// (as Redis does), so that a restart reads it back alone.
			fileValue = strings.Join(g, " ")
		}
		if same(v.Name, fileValue, v.Value) {
			continue
		}
		if e := every[v.Name]; len(e) > 1 {
			for _, j := range e[:len(e)-1] {
				drop[j] = true
			}
		}
		indent := lines[i][:len(lines[i])-len(strings.TrimLeft(lines[i], " \t"))]
		lines[i] = indent + line + lineEnd(lines[i])
	}
	var b bytes.Buffer
	for i, l := range lines {
		if !drop[i] {
			b.WriteString(l)
		}
	}
	if len(appended) > 0 {
		if b.Len() > 0 && !bytes.HasSuffix(b.Bytes(), []byte("\n")) {
			b.WriteByte('\n')
		}
		if !bytes.Contains(src, []byte(RewriteHeader)) {
			b.WriteString(RewriteHeader + "\n")
		}
		for _, l := range appended {
			b.WriteString(l)
		}
	}
	return b.Bytes(), nil
}

// splitLines splits text after each '\n', keeping the line ends.
func splitLines(src []byte) []string {
	var lines []string
	for s := string(src); s != ""; {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			lines = append(lines, s)
			break
		}
		lines = append(lines, s[:i+1])
		s = s[i+1:]
	}
	return lines
}

// lineEnd is l's line end: "\r\n", "\n" or "" (a last line without one).
func lineEnd(l string) string {
	switch {
	case strings.HasSuffix(l, "\r\n"):
		return "\r\n"
	case strings.HasSuffix(l, "\n"):
		return "\n"
	}
	return ""
}

// directiveLine writes "name value", quoting a value that needs it (empty,
// with spaces, quotes or control characters) with Quote, so that SplitLine
// gives the value back whole.
func directiveLine(name, value string) (string, error) {
	return name + " " + Quote(value), nil
}

// WriteFileAtomic replaces the file at path (following a symbolic link to
// the file itself) with data: written to a temporary file in the same
// directory, synced, given the old file's permissions, renamed over it and
// the directory synced, so that a crash leaves the old file or the new
// one, never a part.
func WriteFileAtomic(path string, data []byte) (err error) {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".rewrite-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Chmod(mode); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync() // the rename's durability; not every system can sync a directory
		d.Close()
	}
	return nil
}
