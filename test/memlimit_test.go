package test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// memoryBound is docs/deploy.md's bound on used_memory (the Go heap) for
// maxmemory M and a maxmemory-clients bound C: 1.25 M + C + 12 MiB, the Go
// memory limit the server sets.
func memoryBound(maxmemory, clients int64) int64 {
	return maxmemory + maxmemory/4 + clients + 12<<20
}

// Under maxmemory 20mb an SL.ADD flood fills the keyspace to its bound and
// keeps pushing; used_memory, sampled throughout, stays within the stated
// bound (without the memory limit the heap reached 36-39 MB). The flood's
// clients hold little, so maxmemory-clients is 0 here: the bound is then
// the tightest, 37 MiB.
func TestMemoryBoundUnderFlood(t *testing.T) {
	const maxmemory = 20 << 20
	s := startServer(t, "--maxmemory", "20mb", "--maxmemory-clients", "0", "--save", "")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		oomErr int
	)
	// Until the keyspace has answered OOM for a while (the heap then holds
	// the full keyspace and the garbage of its growth), or ctx ends.
	var full sync.Once
	stop := make(chan struct{})
	const clients, pipe = 4, 1000
	for w := range clients {
		wg.Go(func() {
			c := s.client(t, 2)
			for r := 0; ; r++ {
				select {
				case <-stop:
					return
				default:
				}
				p := c.Pipeline()
				for i := range pipe {
					// Each key's log grows by one entry per SL.ADD.
					p.Do(ctx, "SL.ADD", "flood:"+strconv.Itoa(w)+":"+strconv.Itoa((r*pipe+i)%50000), "100000", "1h")
				}
				cmds, _ := p.Exec(ctx)
				n := 0
				for _, cmd := range cmds {
					if err := cmd.Err(); err != nil && strings.HasPrefix(err.Error(), "OOM") {
						n++
					}
				}
				mu.Lock()
				oomErr += n
				mu.Unlock()
				if n > 0 {
					full.Do(func() { time.AfterFunc(5*time.Second, func() { close(stop) }) })
				}
				if ctx.Err() != nil {
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	c := s.client(t, 2)
	var peak, dataset int64
	for sampling := true; sampling; {
		select {
		case <-done:
			sampling = false
		case <-time.After(50 * time.Millisecond):
		}
		text, err := c.Info(ctx, "memory").Result()
		if err != nil {
			t.Fatal(err)
		}
		inf := parseInfo(text)
		used, _ := strconv.ParseInt(inf["used_memory"], 10, 64)
		peak = max(peak, used)
		dataset, _ = strconv.ParseInt(inf["used_memory_dataset"], 10, 64)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("maxmemory 20mb: peak used_memory %.1f MiB, dataset %.1f MiB, bound %.1f MiB, OOM answers %d",
		float64(peak)/(1<<20), float64(dataset)/(1<<20), float64(memoryBound(maxmemory, 0))/(1<<20), oomErr)
	if oomErr == 0 {
		t.Fatalf("the flood never reached maxmemory (dataset %d bytes): the test proves nothing", dataset)
	}
	if peak > memoryBound(maxmemory, 0) {
		t.Errorf("peak used_memory %d bytes > bound %d (%s)", peak, memoryBound(maxmemory, 0), fmt.Sprint(memoryBound(maxmemory, 0)>>20)+" MiB")
	}
}
