package httplimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/httplimit"
)

// BenchmarkRefusedKey answers: what does a refusal of a key already over
// its limit cost, answered by the deny cache against a round trip to an
// in-process server on loopback (the cache off)?
//
//	go test -run '^$' -bench BenchmarkRefusedKey -benchmem ./httplimit
func BenchmarkRefusedKey(b *testing.B) {
	cs, err := startCellserver()
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Stop()
	for _, bc := range []struct {
		name string
		max  time.Duration
	}{{"deny cache", httplimit.DefaultDenyCacheMax}, {"round trip", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			rdb := redis.NewClient(&redis.Options{Addr: cs.Addr, ContextTimeoutEnabled: true})
			defer rdb.Close()
			// The server's clock stands still: the key stays refused.
			l, err := httplimit.NewLimiter(rdb, []httplimit.Policy{{Name: "p", Burst: 0, Count: 1, Period: time.Hour}},
				httplimit.WithDenyCache(bc.max), httplimit.WithClock(cs.Clock.Time), httplimit.WithTimeout(10*time.Second))
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			for range 2 {
				if _, err := l.Allow(ctx, bc.name); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if d, err := l.Allow(ctx, bc.name); err != nil || d.Allowed {
						b.Errorf("Allow = %+v, %v; want refused", d, err)
						return
					}
				}
			})
		})
	}
}
