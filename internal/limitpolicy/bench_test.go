package limitpolicy

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
)

// BenchmarkApply answers: what does matching one limiter request against
// the override and shadow tables cost, by the number of rules in each
// table and the key's length? "glob" tables hold the pathological
// *a*a*a*a*a*a*a*a*b<i> (no rule matches a key of 'a's); "prefix" tables
// hold tenant<i>:* (the last rule matches the key). The key is matched
// once before timing: the figures are of a table in use.
func BenchmarkApply(b *testing.B) {
	for _, kind := range []string{"glob", "prefix"} {
		for _, n := range []int{1, 128, 1024, 5000} {
			for _, keyLen := range []int{16, 10 << 10} {
				name := kind + "/rules=" + strconv.Itoa(n) + "/key=" + strconv.Itoa(keyLen)
				b.Run(name, func(b *testing.B) {
					var p Policy
					overrides := make([]Override, n)
					shadow := make([]string, n)
					for i := range overrides {
						pat := "*a*a*a*a*a*a*a*a*b" + strconv.Itoa(i)
						if kind == "prefix" {
							pat = "tenant" + strconv.Itoa(i) + ":*"
						}
						overrides[i] = Override{Pattern: pat, Burst: 10, Rate: 10, Period: int64(time.Second)}
						shadow[i] = pat
					}
					p.SetOverrides(overrides)
					p.SetShadow(shadow)
					key := []byte(strings.Repeat("a", keyLen))
					if kind == "prefix" {
						key = []byte("tenant" + strconv.Itoa(n-1) + ":" + strings.Repeat("a", keyLen))
					}
					req := engine.Request{Kind: engine.KindGCRA, Burst: 5, Rate: 10, Period: int64(time.Second), Quantity: 1}
					opt := engine.DefaultParseOptions()
					if err := p.Apply(key, &req, opt); err != nil { // warm-up: the first key of a table builds its path
						b.Fatal(err)
					}
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						r := req
						if err := p.Apply(key, &r, opt); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
