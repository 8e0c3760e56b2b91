package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSoftMemoryLimit(t *testing.T) {
	const mb = 1 << 20
	for _, tc := range []struct {
		maxmemory, clients, cgroup, want int64
	}{
		{0, 0, 0, 0},
		{0, 1024 * mb, 0, 0}, // the clients' bound alone sets no limit
		{20 * mb, 0, 0, 25*mb + limitHeadroom},
		{20 * mb, 16 * mb, 0, 41*mb + limitHeadroom}, // maxmemory-clients auto under 20mb
		{0, 0, 1000 * mb, 850 * mb},
		{20 * mb, 16 * mb, 1000 * mb, 41*mb + limitHeadroom}, // maxmemory binds
		{800 * mb, 400 * mb, 1000 * mb, 850 * mb},            // the container binds
		{100 * mb, 0, 100 * mb, int64(0.85 * 100 * mb)},      // maxmemory as large as the container
	} {
		if got := softMemoryLimit(tc.maxmemory, tc.clients, tc.cgroup); got != tc.want {
			t.Errorf("softMemoryLimit(%d, %d, %d) = %d, want %d", tc.maxmemory, tc.clients, tc.cgroup, got, tc.want)
		}
	}
}

func TestCgroupMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"none", nil, 0},
		{"v2 in its own path", map[string]string{
			"proc/self/cgroup":                          "0::/kubepods/pod1/c1\n",
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "268435456\n",
		}, 268435456},
		{"v2 unlimited", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "max\n",
		}, 0},
		{"v2 namespaced root", map[string]string{
			"proc/self/cgroup":         "0::/elsewhere\n",
			"sys/fs/cgroup/memory.max": "104857600\n",
		}, 104857600},
		{"v1", map[string]string{
			"proc/self/cgroup": "12:cpu,cpuacct:/x\n11:memory:/docker/abc\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "536870912\n",
		}, 536870912},
		{"v1 unlimited", map[string]string{
			"proc/self/cgroup":                           "11:memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
		}, 0},
	} {
		root := t.TempDir()
		for p, body := range tc.files {
			full := filepath.Join(root, p)
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got := cgroupMemoryLimit(root); got != tc.want {
			t.Errorf("%s: cgroupMemoryLimit = %d, want %d", tc.name, got, tc.want)
		}
	}
}
