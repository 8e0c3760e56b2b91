package keyclass

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkClassifyRules answers: what does classifying one key cost, by
// the number of metrics-class rules and the key's length? "glob" rules are
// the pathological *a*a*a*a*a*a*a*a*b<i> (none matches a key of 'a's, so
// the key falls through to the prefix classes); "prefix" rules are
// tenant<i>:* (the last one matches). The key is classified once before
// timing: the figures are of a table in use.
func BenchmarkClassifyRules(b *testing.B) {
	for _, kind := range []string{"glob", "prefix"} {
		for _, n := range []int{1, 128, 1024, 5000} {
			for _, keyLen := range []int{16, 10 << 10} {
				b.Run(fmt.Sprintf("%s/rules=%d/key=%d", kind, n, keyLen), func(b *testing.B) {
					rs := make(Rules, n)
					for i := range rs {
						rs[i] = Rule{Name: fmt.Sprintf("c%d", i), Pattern: fmt.Sprintf("*a*a*a*a*a*a*a*a*b%d", i)}
						if kind == "prefix" {
							rs[i].Pattern = fmt.Sprintf("tenant%d:*", i)
						}
					}
					c := New(Config{Rules: rs, Limit: DefaultLimit}, nil)
					key := []byte(strings.Repeat("a", keyLen))
					if kind == "prefix" {
						key = []byte(fmt.Sprintf("tenant%d:%s", n-1, key))
					}
					c.Classify(key) // warm-up: the first key of a table builds its path
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						c.Classify(key)
					}
				})
			}
		}
	}
}
