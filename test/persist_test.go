package test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/poll"
)

// persistKinds are one exhausting command per limiter kind: the first call
// is allowed, the second limited until the retry_after it reports (seconds
// for CL.THROTTLE, milliseconds for the others). The windows of FW.INCR and
// SW.INCR are 3000 days, so that no window boundary (aligned to the epoch)
// can fall inside the test.
var persistKinds = []struct {
	name string
	args []any // after the key
	unit time.Duration
}{
	{"CL.THROTTLE", []any{0, 1, 60}, time.Second},
	{"TB.TAKE", []any{1, 1, 60}, time.Millisecond},
	{"LB.ADD", []any{1, 1, 60}, time.Millisecond},
	{"FW.INCR", []any{1, "3000d"}, time.Millisecond},
	{"SW.INCR", []any{1, "3000d"}, time.Millisecond},
	{"SL.ADD", []any{1, 60}, time.Millisecond},
}

func limiterCall(t testing.TB, c *redis.Client, cmd, key string, args []any) []int64 {
	t.Helper()
	v, err := c.Do(ctxT(t), append([]any{cmd, key}, args...)...).Result()
	if err != nil {
		t.Fatalf("%s %s: %v", cmd, key, err)
	}
	return ints(t, v)
}

// exhaust makes key limited and returns the retry_after of the limited call.
func exhaust(t testing.TB, c *redis.Client, cmd, key string, args []any) int64 {
	t.Helper()
	if r := limiterCall(t, c, cmd, key, args); r[0] != 0 {
		t.Fatalf("%s %s on a fresh key = %v, want allowed", cmd, key, r)
	}
	r := limiterCall(t, c, cmd, key, args)
	if r[0] != 1 || r[3] <= 0 {
		t.Fatalf("%s %s second call = %v, want limited with a positive retry_after", cmd, key, r)
	}
	return r[3]
}

// checkStillLimited checks that key is limited, with a retry_after that has
// run down from before by at most the time elapsed since the instant since,
// taken before the call that answered before (within one unit of rounding).
func checkStillLimited(t testing.TB, c *redis.Client, cmd, key string, args []any, before int64, unit time.Duration, since time.Time) {
	t.Helper()
	r := limiterCall(t, c, cmd, key, args)
	elapsed := time.Since(since)
	if r[0] != 1 {
		t.Errorf("%s %s after restart = %v, want still limited", cmd, key, r)
		return
	}
	lo := before - int64(elapsed/unit) - 1
	if r[3] > before || r[3] < lo {
		t.Errorf("%s %s retry_after after restart = %d, want %d..%d (%d before, %v elapsed)", cmd, key, r[3], lo, before, before, elapsed)
	}
}

func infoField(t testing.TB, c *redis.Client, field string) string {
	t.Helper()
	s, err := c.Info(ctxT(t), "persistence").Result()
	if err != nil {
		t.Fatalf("INFO persistence: %v", err)
	}
	v, ok := parseInfo(s)[field]
	if !ok {
		t.Fatalf("INFO persistence has no %s:\n%s", field, s)
	}
	return v
}

// exhaustAll exhausts prefix+name for every kind of persistKinds; it
// returns each kind's retry_after and the instant before its first call.
func exhaustAll(t testing.TB, c *redis.Client, prefix string) (map[string]int64, map[string]time.Time) {
	t.Helper()
	before, at := map[string]int64{}, map[string]time.Time{}
	for _, k := range persistKinds {
		at[k.name] = time.Now()
		before[k.name] = exhaust(t, c, k.name, prefix+k.name, k.args)
	}
	return before, at
}

// TestPersistGracefulRestart: keys exhausted before SIGTERM are still
// limited after a restart, with the retry_after they had minus the time
// that passed, for every limiter kind.
func TestPersistGracefulRestart(t *testing.T) {
	s := startServer(t, "--save", "0")
	c := s.client(t, 3)
	before, at := exhaustAll(t, c, "graceful:")
	c.Close()
	s.stop()
	if !strings.Contains(s.output.String(), "final snapshot saved") {
		t.Fatalf("no final save logged on SIGTERM:\n%s", s.output)
	}
	s.restart()
	c = s.client(t, 3)
	for _, k := range persistKinds {
		checkStillLimited(t, c, k.name, "graceful:"+k.name, k.args, before[k.name], k.unit, at[k.name])
	}
	if got := infoField(t, c, "rdb_last_load_keys_loaded"); got != strconv.Itoa(len(persistKinds)) {
		t.Errorf("rdb_last_load_keys_loaded = %s, want %d", got, len(persistKinds))
	}
}

// TestPersistKill9AfterSave: SIGKILL after SAVE keeps everything up to the
// save (and, without a later save, nothing after it).
func TestPersistKill9AfterSave(t *testing.T) {
	s := startServer(t, "--save", "0")
	c := s.client(t, 3)
	before, at := exhaustAll(t, c, "saved:")
	if err := c.Save(ctxT(t)).Err(); err != nil {
		t.Fatalf("SAVE: %v", err)
	}
	if got := infoField(t, c, "rdb_changes_since_last_save"); got != "0" {
		t.Fatalf("rdb_changes_since_last_save after SAVE = %s, want 0", got)
	}
	exhaust(t, c, "CL.THROTTLE", "unsaved", []any{0, 1, 60})
	c.Close()
	s.kill()

	s.restart()
	c = s.client(t, 3)
	for _, k := range persistKinds {
		checkStillLimited(t, c, k.name, "saved:"+k.name, k.args, before[k.name], k.unit, at[k.name])
	}
	if n, err := c.Exists(ctxT(t), "unsaved").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS unsaved = %d, %v: a key written after the SAVE survived a kill -9", n, err)
	}
}

// fill writes n GCRA keys through pipelines.
func fill(t testing.TB, c *redis.Client, prefix string, n int) {
	t.Helper()
	ctx := ctxT(t)
	for i := 0; i < n; i += 5000 {
		p := c.Pipeline()
		for j := i; j < min(n, i+5000); j++ {
			p.Do(ctx, "CL.THROTTLE", prefix+strconv.Itoa(j), 10, 1, 3600)
		}
		if _, err := p.Exec(ctx); err != nil {
			t.Fatalf("fill: %v", err)
		}
	}
}

// TestPersistKill9DuringBGSave kills the server while a BGSAVE is writing
// its temporary file: the restart must load a complete snapshot, the old
// one or the new one, and remove the temporary file.
func TestPersistKill9DuringBGSave(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 300k keys")
	}
	s := startServer(t, "--save", "0")
	c := s.client(t, 3)
	const oldKeys, newKeys = 150_000, 150_000
	fill(t, c, "old:", oldKeys)
	if err := c.Save(ctxT(t)).Err(); err != nil {
		t.Fatalf("SAVE: %v", err)
	}
	fill(t, c, "new:", newKeys)

	// Start a BGSAVE and kill the process as soon as its temporary file
	// appears (polling the directory against a deadline).
	if err := c.BgSave(ctxT(t)).Err(); err != nil {
		t.Fatalf("BGSAVE: %v", err)
	}
	sawTemp := false
	deadline := time.Now().Add(10 * time.Second)
	for !sawTemp && time.Now().Before(deadline) {
		if m, _ := filepath.Glob(filepath.Join(s.Dir, "*.tmp-*")); len(m) > 0 {
			sawTemp = true
		}
	}
	c.Close()
	s.kill()
	if !sawTemp {
		t.Log("the background save ended before its temporary file was seen; checking the restart anyway")
	}

	s.restart()
	c = s.client(t, 3)
	n, err := c.DBSize(ctxT(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if n != oldKeys && n != oldKeys+newKeys {
		t.Fatalf("DBSIZE after kill -9 during BGSAVE = %d, want %d (old snapshot) or %d (new)", n, oldKeys, oldKeys+newKeys)
	}
	if m, _ := filepath.Glob(filepath.Join(s.Dir, "*.tmp-*")); len(m) != 0 {
		t.Fatalf("temporary files left after restart: %v", m)
	}
	t.Logf("killed during BGSAVE (temporary file seen: %v); restart loaded %d keys", sawTemp, n)
}

// TestPersistCorruptSnapshot: a corrupted snapshot stops start-up with a
// message naming the file and the problem, and stays byte for byte; the
// ignore flag moves it aside and starts empty.
func TestPersistCorruptSnapshot(t *testing.T) {
	s := startServer(t, "--save", "0")
	c := s.client(t, 3)
	fill(t, c, "k:", 1000)
	c.Close()
	s.stop()
	path := filepath.Join(s.Dir, "cellserver.snap")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x20
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, s.args...).CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("cellserver started on a corrupt snapshot (err %v):\n%s", err, out)
	}
	msg := string(out)
	for _, want := range []string{path, "corrupt at offset", "checksum mismatch", "--snapshot-ignore-corrupt yes"} {
		if !strings.Contains(msg, want) {
			t.Errorf("start-up error does not mention %q:\n%s", want, msg)
		}
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, b) {
		t.Fatal("the corrupt snapshot was changed by the refused start")
	}

	s.args = append(s.args, "--snapshot-ignore-corrupt", "yes")
	s.restart()
	c = s.client(t, 3)
	if n, err := c.DBSize(ctxT(t)).Result(); err != nil || n != 0 {
		t.Fatalf("DBSIZE with ignore-corrupt = %d, %v; want an empty start", n, err)
	}
	m, _ := filepath.Glob(path + ".corrupt-*")
	if len(m) != 1 {
		t.Fatalf("moved-aside files: %v, want one", m)
	}
	if got, _ := os.ReadFile(m[0]); !bytes.Equal(got, b) {
		t.Fatal("the moved-aside file differs from the corrupt snapshot")
	}
}

// TestPersistUnwritableDir: with its directory gone, SAVE and BGSAVE fail,
// INFO shows it, the server keeps serving, and a save succeeds once the
// directory is back.
func TestPersistUnwritableDir(t *testing.T) {
	s := startServer(t, "--save", "0")
	c := s.client(t, 3)
	if err := os.RemoveAll(s.Dir); err != nil {
		t.Fatal(err)
	}
	exhaust(t, c, "CL.THROTTLE", "k", []any{0, 1, 60})
	if err := c.Save(ctxT(t)).Err(); err == nil || !strings.HasPrefix(err.Error(), "ERR ") {
		t.Fatalf("SAVE into a missing dir = %v, want an ERR reply", err)
	}
	if err := c.BgSave(ctxT(t)).Err(); err != nil {
		t.Fatalf("BGSAVE = %v, want it started (its failure shows in INFO)", err)
	}
	poll.Until(t, 10*time.Second, func() error {
		if v := infoField(t, c, "rdb_bgsave_in_progress"); v != "0" {
			return fmt.Errorf("rdb_bgsave_in_progress = %s, want 0", v)
		}
		return nil
	})
	if got := infoField(t, c, "rdb_last_bgsave_status"); got != "err" {
		t.Fatalf("rdb_last_bgsave_status = %s, want err", got)
	}
	if got := infoField(t, c, "rdb_last_save_error"); !strings.Contains(got, "no such file") {
		t.Fatalf("rdb_last_save_error = %q, want the cause (no such file)", got)
	}
	// Still serving, state intact.
	if r := limiterCall(t, c, "CL.THROTTLE", "k", []any{0, 1, 60}); r[0] != 1 {
		t.Fatalf("CL.THROTTLE k after failed saves = %v, want limited", r)
	}
	if err := os.Mkdir(s.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.Save(ctxT(t)).Err(); err != nil {
		t.Fatalf("SAVE once the dir is back: %v", err)
	}
	if got := infoField(t, c, "rdb_last_bgsave_status"); got != "ok" {
		t.Fatalf("rdb_last_bgsave_status after a good save = %s, want ok", got)
	}
}

// TestPersistInMemory: save "" runs in memory only: a snapshot in dir is
// neither loaded nor written (not even at SIGTERM), SAVE and BGSAVE say
// persistence is off, and whether the server persists at all cannot be
// changed by CONFIG SET. save 0 keeps loading at start and saving at
// SIGTERM.
func TestPersistInMemory(t *testing.T) {
	s := startServer(t, "--save", "0")
	c := s.client(t, 3)
	ctx := ctxT(t)
	exhaust(t, c, "CL.THROTTLE", "kept", []any{0, 1, 600})
	if err := c.ConfigSet(ctx, "save", "").Err(); err == nil || !strings.Contains(err.Error(), "chosen at start") {
		t.Errorf(`CONFIG SET save "" on a persisting server = %v, want a refusal`, err)
	}
	if v, err := c.ConfigGet(ctx, "save").Result(); err != nil || v["save"] != "0" {
		t.Errorf("CONFIG GET save = %v, %v; want 0", v, err)
	}
	c.Close()
	s.stop()
	snap := filepath.Join(s.Dir, "cellserver.snap")
	saved, err := os.ReadFile(snap)
	if err != nil {
		t.Fatalf("save 0: no snapshot written at SIGTERM: %v", err)
	}

	mem := startServer(t, "--dir", s.Dir, "--save", "")
	c = mem.client(t, 3)
	if r := limiterCall(t, c, "CL.THROTTLE", "kept", []any{0, 1, 600}); r[0] != 0 {
		t.Errorf(`save "": CL.THROTTLE kept = %v: the snapshot was loaded`, r)
	}
	exhaust(t, c, "CL.THROTTLE", "lost", []any{0, 1, 600})
	const off = "ERR persistence is off"
	for _, cmd := range [][]any{{"SAVE"}, {"BGSAVE"}, {"SHUTDOWN", "SAVE"}} {
		if err := c.Do(ctx, cmd...).Err(); err == nil || !strings.HasPrefix(err.Error(), off) {
			t.Errorf(`save "": %v = %v, want %q…`, cmd, err, off)
		}
	}
	if v, err := c.ConfigGet(ctx, "save").Result(); err != nil || v["save"] != "" {
		t.Errorf(`save "": CONFIG GET save = %v, %v; want ""`, v, err)
	}
	if err := c.ConfigSet(ctx, "save", "60").Err(); err == nil || !strings.Contains(err.Error(), "in memory only") {
		t.Errorf(`save "": CONFIG SET save 60 = %v, want a refusal`, err)
	}
	if err := c.ConfigSet(ctx, "save", "").Err(); err != nil {
		t.Errorf(`save "": CONFIG SET save "" = %v`, err)
	}
	c.Close()
	mem.stop()
	if strings.Contains(mem.output.String(), "snapshot saved") {
		t.Errorf(`save "": a snapshot was saved at SIGTERM:\n%s`, mem.output)
	}
	if now, err := os.ReadFile(snap); err != nil || !bytes.Equal(now, saved) {
		t.Errorf(`save "": the snapshot file changed (%v)`, err)
	}

	s.restart()
	c = s.client(t, 3)
	if r := limiterCall(t, c, "CL.THROTTLE", "kept", []any{0, 1, 600}); r[0] != 1 {
		t.Errorf("CL.THROTTLE kept after the in-memory run = %v, want still limited (snapshot untouched)", r)
	}
	if n, err := c.Exists(ctx, "lost").Result(); err != nil || n != 0 {
		t.Errorf("EXISTS lost = %d, %v; want 0: the in-memory run wrote it", n, err)
	}
}
