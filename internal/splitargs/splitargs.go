// Package splitargs reads a line of words the way Redis's sdssplitargs
// does: the one reader of quoted words, used by inline commands on the
// wire (resp) and by configuration lines and list-valued settings
// (internal/setting).
//
// Words are separated by spaces; leading space is any of C's isspace
// (space, \t, \n, \v, \f, \r) and a bare word ends at space, \t, \n or \r,
// as in Redis. "Double quotes" take the escapes \" \\ \n \r \t \b \a and
// \xHH (any other escaped byte stands for itself); 'single quotes' only
// \'. A quote may open inside a word (a"b c" is the word `ab c`), and a
// closing quote must end the word. Unlike Redis's C strings, a NUL byte is
// an ordinary byte.
//
// The package has no state; it is safe for concurrent use.
package splitargs

import "errors"

// ErrUnbalancedQuotes is returned for a quote never closed.
var ErrUnbalancedQuotes = errors.New("unbalanced quotes")

// ErrQuoteFollowed is returned for a closing quote followed by something
// other than a space or the end of the line.
var ErrQuoteFollowed = errors.New("a closing quote must be followed by a space or the end of the line")

// Split appends the words of line to dst and returns it. It unescapes in
// place: each word is a sub-slice of line (capacity clipped to its length),
// whose bytes Split overwrites, so the caller must not use line's old
// contents afterwards. An escape never produces more bytes than it reads,
// so the output never outgrows the input.
func Split(dst [][]byte, line []byte) ([][]byte, error) {
	i := 0
	for {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i == len(line) {
			return dst, nil
		}
		start, out := i, i
		var quote byte // the open quote, 0 outside quotes
	word:
		for ; ; i++ {
			switch {
			case quote != 0 && i == len(line):
				return dst, ErrUnbalancedQuotes
			case quote == '"' && line[i] == '\\' && i+3 < len(line) && line[i+1] == 'x' && isHex(line[i+2]) && isHex(line[i+3]):
				line[out] = unhex(line[i+2])<<4 | unhex(line[i+3])
				out++
				i += 3
			case quote == '"' && line[i] == '\\' && i+1 < len(line):
				i++
				line[out] = unescape(line[i])
				out++
			case quote == '\'' && line[i] == '\\' && i+1 < len(line) && line[i+1] == '\'':
				i++
				line[out] = '\''
				out++
			case quote != 0 && line[i] == quote:
				if i+1 < len(line) && !isSpace(line[i+1]) {
					return dst, ErrQuoteFollowed
				}
				i++
				break word
			case quote != 0:
				line[out] = line[i]
				out++
			case i == len(line) || endsWord(line[i]):
				break word
			case line[i] == '"' || line[i] == '\'':
				quote = line[i]
			default:
				line[out] = line[i]
				out++
			}
		}
		dst = append(dst, line[start:out:out])
	}
}

// isSpace is C's isspace: what Redis skips between words.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// endsWord is what ends a bare word in sdssplitargs (\v and \f do not).
func endsWord(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

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
