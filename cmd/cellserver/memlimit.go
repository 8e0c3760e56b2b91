package main

import (
	"bufio"
	"bytes"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// Memory sizing. maxmemory bounds the keyspace, but the process holds more:
// the Go collector lets the heap grow to twice the live data before it
// runs (GOGC=100), so with maxmemory 20mb the heap (used_memory) reached
// 36-39 MB under an SL.ADD flood, and a container sized from maxmemory was
// killed. A soft memory limit (debug.SetMemoryLimit) makes the collector
// run before the heap passes it. It is derived from maxmemory and
// maxmemory-clients (what the clients may hold beside the keyspace) and
// from the container's memory limit (cgroup), whichever is lower; a user's
// GOMEMLIMIT is left as it is.
const (
	// limitHeadroom is the room above maxmemory and maxmemory-clients for
	// everything else: connections' fixed buffers, the raft log's caches,
	// the runtime's own structures, and the keyspace's overshoot of
	// maxmemory by one batch of writes.
	limitHeadroom = 12 << 20
	// cgroupShare is the share of a container's memory limit given to the
	// Go runtime: the rest is for what the runtime does not count (the
	// binary's text, freed pages not yet returned, the kernel's page
	// cache charged to the container).
	cgroupShare = 0.85
)

// softMemoryLimit returns the Go runtime's memory limit in bytes for a
// keyspace bound of maxmemory bytes (0: none) and a bound of clients bytes
// on the clients' memory (maxmemory-clients in force; 0: none) in a
// container limited to cgroupLimit bytes (0: none), or 0 when neither
// maxmemory nor the container bounds it. The part from maxmemory is
// maxmemory plus a quarter (the collector needs slack above the live data
// to run seldom), plus clients, plus limitHeadroom.
func softMemoryLimit(maxmemory, clients, cgroupLimit int64) int64 {
	limit := int64(0)
	if maxmemory > 0 {
		limit = maxmemory + maxmemory/4 + clients + limitHeadroom
	}
	if cgroupLimit > 0 {
		c := int64(float64(cgroupLimit) * cgroupShare)
		if limit == 0 || c < limit {
			limit = c
		}
	}
	return limit
}

// setMemoryLimit applies softMemoryLimit to the Go runtime unless the user
// set GOMEMLIMIT, and logs what it chose. The limit is read at start-up: a
// later CONFIG SET maxmemory or maxmemory-clients does not move it. The
// returned function puts the previous limit back (a server started again
// in the same process starts from the runtime's own).
func setMemoryLimit(maxmemory, clients int64, logger *slog.Logger) (restore func()) {
	if v, ok := os.LookupEnv("GOMEMLIMIT"); ok && v != "" {
		logger.Info("Go memory limit from GOMEMLIMIT", "limit", v)
		return func() {}
	}
	cg := cgroupMemoryLimit("/")
	limit := softMemoryLimit(maxmemory, clients, cg)
	if limit == 0 {
		return func() {}
	}
	prev := debug.SetMemoryLimit(limit)
	logger.Info("Go memory limit set", "limit_bytes", limit, "maxmemory", maxmemory, "maxmemory_clients", clients, "cgroup_limit_bytes", cg)
	return func() { debug.SetMemoryLimit(prev) }
}

// cgroupMemoryLimit returns the memory limit of the cgroup this process
// runs in (bytes; 0 when there is none or it cannot be read), under the
// file system root root ("/" outside tests). It reads cgroup v2's
// memory.max, then v1's memory.limit_in_bytes.
func cgroupMemoryLimit(root string) int64 {
	var candidates []string
	if b, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup")); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			// v2: "0::/path"; v1: "N:memory:/path" (or "N:cpu,memory:...").
			parts := strings.SplitN(sc.Text(), ":", 3)
			if len(parts) != 3 {
				continue
			}
			switch {
			case parts[0] == "0" && parts[1] == "":
				candidates = append(candidates, filepath.Join(root, "sys/fs/cgroup", parts[2], "memory.max"))
			case strings.Contains(","+parts[1]+",", ",memory,"):
				candidates = append(candidates, filepath.Join(root, "sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes"))
			}
		}
	}
	// Inside a container's cgroup namespace the paths above may not exist
	// while the root of the hierarchy is the container's own.
	candidates = append(candidates,
		filepath.Join(root, "sys/fs/cgroup/memory.max"),
		filepath.Join(root, "sys/fs/cgroup/memory/memory.limit_in_bytes"))
	for _, p := range candidates {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0
		}
		v, err := strconv.ParseInt(s, 10, 64)
		// v1 writes a huge number (page-rounded MaxInt64) for "no limit".
		if err != nil || v <= 0 || v >= math.MaxInt64/2 {
			return 0
		}
		return v
	}
	return 0
}
