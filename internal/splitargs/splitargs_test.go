package splitargs

import (
	"errors"
	"reflect"
	"testing"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  error
	}{
		{"", nil, nil},
		{" \t\v\f\r\n ", nil, nil},
		{"set k v", []string{"set", "k", "v"}, nil},
		{"  set\tk  v  ", []string{"set", "k", "v"}, nil},
		{`"a b" 'c d'`, []string{"a b", "c d"}, nil},
		{`a"b c"`, []string{"ab c"}, nil},
		{`a'b c'`, []string{"ab c"}, nil},
		{`"\x41\x4a\x4A\x4x"`, []string{"AJJx4x"}, nil},
		{`"\n\r\t\b\a\"\\\q"`, []string{"\n\r\t\b\a\"\\q"}, nil},
		{`'it\'s' '\n'`, []string{"it's", `\n`}, nil},
		{`""`, []string{""}, nil},
		{`'' x`, []string{"", "x"}, nil},
		{"a\vb", []string{"a\vb"}, nil}, // \v separates only before a word, as in Redis
		{"a\x00b", []string{"a\x00b"}, nil},
		{`"open`, nil, ErrUnbalancedQuotes},
		{`'open`, nil, ErrUnbalancedQuotes},
		{`"trailing\`, nil, ErrUnbalancedQuotes},
		{`"x"y`, nil, ErrQuoteFollowed},
		{`'x'y`, nil, ErrQuoteFollowed},
	}
	for _, tt := range tests {
		words, err := Split(nil, []byte(tt.in))
		if !errors.Is(err, tt.err) {
			t.Errorf("Split(%q) error = %v, want %v", tt.in, err, tt.err)
			continue
		}
		if err != nil {
			continue
		}
		var got []string
		for _, w := range words {
			got = append(got, string(w))
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Split(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestSplitWordsDoNotAlias checks that appending to one word cannot
// overwrite the next (each word's capacity is clipped to its length).
func TestSplitWordsDoNotAlias(t *testing.T) {
	words, err := Split(nil, []byte(`"a" b`))
	if err != nil {
		t.Fatal(err)
	}
	_ = append(words[0], 'X', 'Y', 'Z')
	if string(words[1]) != "b" {
		t.Fatalf("second word = %q after appending to the first, want %q", words[1], "b")
	}
}
