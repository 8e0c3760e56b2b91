package resp

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/decide"
	"github.com/cellserver/cellserver/replication"
	"github.com/cellserver/cellserver/shards"
)

// fsmBackend is the Local backend with the cluster state machine's per-op
// slot decision stood in by errs (key → the error its ops fail with); it
// records whether each op came with Asking.
type fsmBackend struct {
	*decide.Local
	mu     sync.Mutex
	errs   map[string]error
	asking map[string]bool
}

func (b *fsmBackend) Write(ctx context.Context, ops []shards.Op, res []shards.Result) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range ops {
		if len(ops[i].Keys) > 0 {
			b.asking[string(ops[i].Keys[0])] = ops[i].Asking
			if err := b.errs[string(ops[i].Keys[0])]; err != nil {
				res[i] = shards.Result{Err: err}
				continue
			}
		}
		if err := b.Local.Write(ctx, ops[i:i+1], res[i:i+1]); err != nil {
			return err
		}
	}
	return nil
}

func (b *fsmBackend) askedFor(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.asking[key]
}

// startRouted starts a server in cluster mode over fc whose backend is an
// fsmBackend.
func startRouted(t *testing.T, fc *fakeCluster, errs map[string]error) (*testServer, *fsmBackend) {
	t.Helper()
	cfg, store, clock := testBase(t)
	cfg.Cluster = fc
	be := &fsmBackend{Local: decide.NewLocal(store, clock.Now), errs: errs, asking: map[string]bool{}}
	srv, err := NewServer(cfg, be)
	if err != nil {
		t.Fatal(err)
	}
	return serveTest(t, srv, store, clock), be
}

// cmd encodes a command as a RESP array.
func cmd(args ...string) string {
	var b strings.Builder
	b.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b.WriteString("$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n")
	}
	return b.String()
}

// firstLine reads one reply and returns its first line (an array's
// header, whose elements it reads and drops).
func (rc *rawConn) firstLine(t *testing.T) string {
	t.Helper()
	l := rc.line(t)
	if l[0] == '*' {
		n, _ := strconv.Atoi(l[1:])
		for range n {
			rc.firstLine(t)
		}
	}
	if l[0] == '$' {
		if n, _ := strconv.Atoi(l[1:]); n >= 0 {
			rc.line(t)
		}
	}
	return l
}

func TestClusterRouting(t *testing.T) {
	fc := twoGroups() // a (here) owns 0-8191, migrating 100 to b; b owns the rest
	fc.groups[0].Importing = map[int]string{9000: "b"}
	fc.owner[8001] = 2 // c: no leader known
	delete(fc.owner, 8000)
	fc.rebuild()
	mine, mine2 := keyOfSlot(t, 5), keyOfSlot(t, 6)
	theirs := "foo" // 12182
	imp := keyOfSlot(t, 9000)
	mig := keyOfSlot(t, 100)
	errs := map[string]error{
		"{" + mig + "}ask": cluster.ErrAsk, "{" + mine + "}lag": cluster.ErrMoved, "{" + imp + "}gone": cluster.ErrMoved,
		"{" + mine + "}split": cluster.ErrTryAgain, "{" + mine + "}moving": shards.ErrMoving,
		"{" + mine + "}busy": shards.ErrBusyKey, "{" + theirs + "}notimp": cluster.ErrMoved,
	}
	tomb := "{" + mine + "}tomb" // moved away; its slot is stable again
	fc.tombstones = map[string]bool{tomb: true}
	ts, be := startRouted(t, fc, errs)
	throttle := func(k string) string { return cmd("CL.THROTTLE", k, "5", "10", "60") }
	for _, tc := range []struct {
		name string
		in   string   // one batch
		want []string // the first line of each reply
	}{
		{"mine", throttle(mine), []string{"*5"}},
		{"theirs", throttle(theirs), []string{"-MOVED 12182 127.0.0.1:7011"}},
		{"read theirs", cmd("GET", theirs), []string{"-MOVED 12182 127.0.0.1:7011"}},
		{"unowned", throttle(keyOfSlot(t, 8000)), []string{"-CLUSTERDOWN Hash slot not served"}},
		{"no leader", throttle(keyOfSlot(t, 8001)), []string{"-MOVED 8001 127.0.0.1:7021"}},
		{"crossslot", cmd("CL.THROTTLEALL", mine, "5", "10", "60", "1", theirs, "5", "10", "60", "1"), []string{"-CROSSSLOT Keys in request don't hash to the same slot"}},
		{"cross mine", cmd("CL.THROTTLEALL", mine, "5", "10", "60", "1", mine2, "5", "10", "60", "1"), []string{"*2"}},
		{"exists cross", cmd("EXISTS", mine, theirs), []string{"-CROSSSLOT Keys in request don't hash to the same slot"}},
		{"del theirs", cmd("DEL", theirs), []string{"-MOVED 12182 127.0.0.1:7011"}},
		{"importing", throttle(imp), []string{"-MOVED 9000 127.0.0.1:7011"}},
		{"asking", cmd("ASKING") + throttle(imp) + throttle(imp), []string{"+OK", "*5", "-MOVED 9000 127.0.0.1:7011"}},
		{"asking one-shot", cmd("ASKING") + cmd("PING") + throttle(imp), []string{"+OK", "+PONG", "-MOVED 9000 127.0.0.1:7011"}},
		{"asking unknown", cmd("ASKING") + cmd("NOSUCH") + cmd("GET", imp), []string{"+OK", "-ERR unknown command 'NOSUCH', with args beginning with: ", "-MOVED 9000 127.0.0.1:7011"}},
		{"asking read", cmd("ASKING") + cmd("GET", imp), []string{"+OK", "$"}}, // created by "asking"
		// A write after ASKING goes to the log, whose state machine decides
		// (this node may not have applied IMPORTING yet); a read is
		// decided here.
		{"asking not importing", cmd("ASKING") + throttle("{"+theirs+"}notimp"), []string{"+OK", "-MOVED 12182 127.0.0.1:7011"}},
		{"asking read not importing", cmd("ASKING") + cmd("GET", theirs), []string{"+OK", "-MOVED 12182 127.0.0.1:7011"}},
		{"migrating absent", cmd("GET", mig), []string{"-ASK 100 127.0.0.1:7011"}},
		{"migrating write", throttle(mig) + cmd("TTL", mig), []string{"*5", ":"}},
		{"migrating split", cmd("EXISTS", mig, "{"+mig+"}other"), []string{"-TRYAGAIN Multiple keys request during rehashing of slot"}},
		{"fsm ask", throttle("{" + mig + "}ask"), []string{"-ASK 100 127.0.0.1:7011"}},
		{"fsm moved, table behind", throttle("{" + mine + "}lag"), []string{"-TRYAGAIN Multiple keys request during rehashing of slot"}},
		{"fsm moved", cmd("ASKING") + throttle("{"+imp+"}gone"), []string{"+OK", "-MOVED 9000 127.0.0.1:7011"}},
		{"fsm split", throttle("{" + mine + "}split"), []string{"-TRYAGAIN Multiple keys request during rehashing of slot"}},
		{"fsm moving", throttle("{" + mine + "}moving"), []string{"-TRYAGAIN Key is being migrated, retry"}},
		{"fsm busy", throttle("{" + mine + "}busy"), []string{"-BUSYKEY Target key name already exists."}},
		{"keyless", cmd("DBSIZE"), []string{":"}},
		// A key moved away is never read here as a fresh key.
		{"read tombstone", cmd("EXISTS", tomb), []string{"-TRYAGAIN Multiple keys request during rehashing of slot"}},
	} {
		rc := ts.raw(t)
		rc.send(t, tc.in)
		for i, want := range tc.want {
			if got := rc.firstLine(t); !strings.HasPrefix(got, want) {
				t.Errorf("%s: reply %d = %q, want %q", tc.name, i, got, want)
			}
		}
	}
	if !be.askedFor(imp) {
		t.Errorf("CL.THROTTLE %s after ASKING: op.Asking false, want true", imp)
	}
	if be.askedFor(mine) {
		t.Errorf("CL.THROTTLE %s: op.Asking true, want false", mine)
	}
}

// An unsharded group and a standalone server route nothing: every key is
// served, ASKING or not.
func TestRoutingUnsharded(t *testing.T) {
	fc := newFakeCluster(0, "n1", []cluster.GroupView{{Name: "g", Reachable: true, Members: []cluster.GroupMember{member("g", "n1", 7001, true)}}})
	if fc.Routing().Sharded {
		t.Fatal("one group without slots: Sharded = true, want false")
	}
	ts, _ := startRouted(t, fc, nil)
	rc := ts.raw(t)
	rc.send(t, cmd("CL.THROTTLEALL", "a", "5", "10", "60", "1", "b", "5", "10", "60", "1")+cmd("GET", "foo"))
	for _, want := range []string{"*2", "$"} {
		if got := rc.firstLine(t); !strings.HasPrefix(got, want) {
			t.Errorf("unsharded reply = %q, want %q", got, want)
		}
	}
}

func TestCommandKeys(t *testing.T) {
	tab := map[string]*Command{}
	for _, c := range commands(registerBuiltin) {
		tab[c.Name] = c
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cl.throttle", "k", "1", "2", "3"}, "k"},
		{[]string{"cl.throttleall", "a", "1", "2", "3", "1", "b", "1", "2", "3", "1"}, "a b"},
		{[]string{"del", "a", "b", "c"}, "a b c"},
		{[]string{"migrate", "h", "1", "k", "0", "10"}, "k"},
		{[]string{"migrate", "h", "1", "", "0", "10", "REPLACE", "KEYS", "a", "b"}, "a b"},
		{[]string{"migrate", "h", "1", "", "0", "10", "AUTH", "keys", "KEYS", "a"}, "a"},
		{[]string{"restore", "k", "0", "x"}, "k"},
	} {
		args := make([][]byte, len(tc.args))
		for i, a := range tc.args {
			args[i] = []byte(a)
		}
		var got []string
		for _, k := range commandKeys(nil, tab[tc.args[0]], args) {
			got = append(got, string(k))
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("commandKeys(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
	// COMMAND INFO flags MIGRATE's keys as movable, as Redis does.
	ts := startServer(t, nil)
	info, err := ts.client(t, 2, "").Do(context.Background(), "COMMAND", "INFO", "migrate").Slice()
	if err != nil || len(info) != 1 {
		t.Fatalf("COMMAND INFO migrate = %v, %v", info, err)
	}
	if flags := fmt.Sprint(info[0].([]any)[2]); !strings.Contains(flags, "movablekeys") {
		t.Errorf("MIGRATE's flags %s lack movablekeys", flags)
	}
}

func TestClusterErrorTexts(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&cluster.RedirectError{Slot: 12182, Addr: "10.0.0.1:7000"}, "MOVED 12182 10.0.0.1:7000"},
		{&cluster.RedirectError{Ask: true, Slot: 1, Addr: "[::1]:7000"}, "ASK 1 [::1]:7000"},
		{cluster.ErrCrossSlot, "CROSSSLOT Keys in request don't hash to the same slot"},
		{cluster.ErrSlotNotServed, "CLUSTERDOWN Hash slot not served"},
		{cluster.ErrTryAgain, "TRYAGAIN Multiple keys request during rehashing of slot"},
		{shards.ErrMoving, "TRYAGAIN Key is being migrated, retry"},
		{shards.ErrBusyKey, "BUSYKEY Target key name already exists."},
		{&cluster.SlotError{Slot: 3, Err: cluster.ErrSlotBusy}, "ERR Slot 3 is already busy"},
		{fmt.Errorf("forward: %w", &cluster.SlotError{Slot: 7, Err: cluster.ErrSlotUnassigned}), "ERR Slot 7 is already unassigned"},
		{&cluster.SlotError{Slot: 9, Err: cluster.ErrSlotNotOwned}, "ERR I'm not the owner of hash slot 9"},
		{&cluster.SlotError{Slot: 9, Err: cluster.ErrSlotOwned}, "ERR I'm already the owner of hash slot 9"},
		{&cluster.SlotError{Slot: 12, Err: cluster.ErrSlotHasKeys}, "ERR Can't assign hashslot 12 to a different node while I still hold keys for this hash slot."},
		{unknownNode(cluster.ErrUnknownNode, "abc"), "ERR I don't know about node abc"},
		{cluster.ErrGroupUnknown, "ERR another group has not answered lately, so its slots are unknown: retry in a moment"},
		{replication.ErrOwnGroup, "ERR that node belongs to this group: CLUSTER MEET introduces another group"},
		{replication.ErrOtherGroup, "ERR that node belongs to another group (its --group differs from this node's); a group only joins nodes of its own name"},
	} {
		if got := string(appendErrorText(nil, tc.err)); got != tc.want {
			t.Errorf("appendErrorText(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// A slot whose owner this node cannot know yet (a group met, or known
// since a restart, that has not answered) is not a misconfiguration: the
// reply says so and that a retry will do, unlike a slot nobody owns.
func TestRoutingGroupNotHeardFrom(t *testing.T) {
	fc := twoGroups()
	delete(fc.owner, 8000)
	fc.rebuild()
	ts, _ := startRouted(t, fc, nil)
	unowned := cmd("CL.THROTTLE", keyOfSlot(t, 8000), "5", "10", "60")
	rc := ts.raw(t)
	rc.send(t, unowned)
	if got, want := rc.firstLine(t), "-CLUSTERDOWN Hash slot not served"; got != want {
		t.Errorf("every group heard from: %q, want %q", got, want)
	}

	fc.groups = append(fc.groups, cluster.GroupView{Name: "d"}) // met, no answer yet
	fc.rebuild()
	rc.send(t, unowned)
	if got, want := rc.firstLine(t), "-CLUSTERDOWN Hash slot not served yet: a group of the cluster has not answered this node (just after CLUSTER MEET or a restart); retry in a moment"; got != want {
		t.Errorf("group d not heard from: %q, want %q", got, want)
	}
}

func (b *fsmBackend) WriteAtomic(ctx context.Context, ops []shards.Op, res []shards.Result) error {
	return b.Write(ctx, ops, res)
}
