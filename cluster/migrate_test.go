package cluster

import (
	"cmp"
	"errors"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/shards"
	"github.com/cellserver/cellserver/snapshot"
)

// storeKeyspace is a MoveKeyspace over a keyspace in this process (a
// standalone server's, without the RESP connection in front of it).
type storeKeyspace struct {
	s   *shards.Store
	now int64
}

func (k *storeKeyspace) ReadNow() error { return nil }

func (k *storeKeyspace) Moving(key []byte) (engine.State, bool) { return k.s.Moving(key) }

func (k *storeKeyspace) Write(ops []shards.Op) error {
	for i := range ops {
		var res shards.Result
		k.s.Exec(&ops[i], k.now, &res)
		if res.Err != nil {
			return res.Err
		}
	}
	return nil
}

// storeTarget restores into another keyspace in this process, as a
// cellserver target's RESTORE does, or fails as told.
type storeTarget struct {
	dst   *shards.Store
	now   int64
	fail  error // every key not restored, and Restore's result
	lost  bool  // the RESTOREs went out and no reply came: Unknown
	calls int
}

func (t *storeTarget) Restore(_ string, _ time.Duration, keys []MoveKey) error {
	t.calls++
	switch {
	case t.lost:
		for i := range keys {
			keys[i].Unknown, keys[i].Err = true, t.fail
		}
		return t.fail
	case errors.Is(t.fail, ErrTargetUnreachable):
		for i := range keys {
			keys[i].Err, keys[i].Retry = t.fail, true
		}
		return t.fail
	}
	var first error
	for i := range keys {
		st, err := snapshot.DecodeDump(keys[i].Payload)
		if err != nil {
			return err
		}
		var res shards.Result
		t.dst.Exec(&shards.Op{Code: shards.OpRestore, Keys: [][]byte{keys[i].Key}, State: st, Replace: keys[i].Replace}, t.now, &res)
		if res.Err != nil {
			keys[i].Err = res.Err
			first = cmp.Or(first, res.Err)
			continue
		}
		keys[i].Restored = true
	}
	return first
}

// TestMigrationPhases: a Migration takes the keys out, restores them on
// its target and settles them: restored keys leave the source, refused
// ones go back, keys of unknown outcome stay in flight (InFlightError),
// an unreachable target puts them back, absent keys are NOKEY, and a key
// in flight to a member of another group is not sent elsewhere.
func TestMigrationPhases(t *testing.T) {
	const now = int64(1_700_000_000) * 1e9
	req := engine.Request{Kind: engine.KindGCRA, Burst: 0, Rate: 1, Period: 60e9, Quantity: 1}
	tests := []struct {
		name     string
		keys     []string // created on the source (k*) or not (absent*)
		onTarget []string // already on the target
		fail     error
		lost     bool
		sent     int
		wantErr  error
		left     []string // live on the source afterwards
		inFlight []string // moving on the source afterwards
		landed   []string // on the target afterwards
	}{
		{name: "moved", keys: []string{"k1", "k2"}, sent: 2, landed: []string{"k1", "k2"}},
		{name: "absent keys", keys: []string{"absent"}, sent: 0},
		{name: "one refused goes back", keys: []string{"k1", "k2"}, onTarget: []string{"k2"}, sent: 2, wantErr: shards.ErrBusyKey,
			left: []string{"k2"}, landed: []string{"k1", "k2"}},
		{name: "unreachable target", keys: []string{"k1"}, fail: ErrTargetUnreachable, sent: 1, wantErr: ErrTargetUnreachable, left: []string{"k1"}},
		{name: "reply lost", keys: []string{"k1", "k2"}, fail: errors.New("read timeout"), lost: true, sent: 2,
			wantErr: &InFlightError{}, inFlight: []string{"k1", "k2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src, _ := shards.New(shards.Config{Shards: 2})
			dst, _ := shards.New(shards.Config{Shards: 2})
			ks := &storeKeyspace{s: src, now: now}
			for _, k := range tc.keys {
				if k[0] == 'k' {
					var res shards.Result
					src.Exec(&shards.Op{Code: shards.OpLimit, Keys: [][]byte{[]byte(k)}, Reqs: []engine.Request{req}}, now, &res)
				}
			}
			for _, k := range tc.onTarget {
				var res shards.Result
				dst.Exec(&shards.Op{Code: shards.OpLimit, Keys: [][]byte{[]byte(k)}, Reqs: []engine.Request{req}}, now, &res)
			}
			var keys [][]byte
			for _, k := range tc.keys {
				keys = append(keys, []byte(k))
			}
			m := &Migration{Addr: "127.0.0.1:7000", Timeout: time.Second, Keys: keys, Keyspace: ks,
				Target: &storeTarget{dst: dst, now: now, fail: tc.fail, lost: tc.lost}}
			sent, err := m.Run()
			var inFl *InFlightError
			switch {
			case sent != tc.sent:
				t.Errorf("Run sent %d keys, want %d", sent, tc.sent)
			case tc.wantErr == nil && err != nil,
				tc.wantErr != nil && !errors.Is(err, tc.wantErr) && !(errors.As(tc.wantErr, &inFl) && errors.As(err, &inFl)):
				t.Errorf("Run = %v, want %v", err, tc.wantErr)
			}
			if errors.As(err, &inFl) && inFl.Keys != len(tc.inFlight) {
				t.Errorf("InFlightError counts %d keys, want %d", inFl.Keys, len(tc.inFlight))
			}
			has := func(names []string, k string) bool {
				for _, n := range names {
					if n == k {
						return true
					}
				}
				return false
			}
			for _, k := range tc.keys {
				_, live := src.Lookup([]byte(k), now)
				_, moving := src.Moving([]byte(k))
				_, there := dst.Lookup([]byte(k), now)
				if live != has(tc.left, k) || moving != has(tc.inFlight, k) || there != has(tc.landed, k) {
					t.Errorf("%s: on the source %v, in flight %v, on the target %v; want %v, %v, %v",
						k, live, moving, there, has(tc.left, k), has(tc.inFlight, k), has(tc.landed, k))
				}
			}
		})
	}

	// A key in flight to a member of group b is not sent to group c.
	src, _ := shards.New(shards.Config{Shards: 2})
	var res shards.Result
	src.Exec(&shards.Op{Code: shards.OpLimit, Keys: [][]byte{[]byte("k")}, Reqs: []engine.Request{req}}, now, &res)
	src.Exec(&shards.Op{Code: shards.OpMoveOut, Keys: [][]byte{[]byte("k")}, Dest: "127.0.0.1:7002"}, now, &res)
	r := NewRouting(0, "a1", []GroupView{
		{Name: "a", Slots: [][2]int{{0, 16383}}, Reachable: true, Members: []GroupMember{{ID: "1", RespAddr: "127.0.0.1:7001"}}},
		{Name: "b", Reachable: true, Members: []GroupMember{{ID: "2", RespAddr: "127.0.0.1:7002"}}},
		{Name: "c", Reachable: true, Members: []GroupMember{{ID: "3", RespAddr: "127.0.0.1:7003"}}},
	})
	tg := &storeTarget{}
	m := &Migration{Addr: "127.0.0.1:7003", Timeout: time.Second, Keys: [][]byte{[]byte("k")}, Keyspace: &storeKeyspace{s: src, now: now}, Target: tg,
		Routing: func() *Routing { return r }, MoveDest: func([]byte) string { return "127.0.0.1:7002" }}
	var re *ResendError
	if _, err := m.Run(); !errors.As(err, &re) || re.Group != "b" || re.Dest != "127.0.0.1:7002" || tg.calls != 0 {
		t.Errorf("Run of a key in flight to b, to a member of c = %v (%d restores); want a ResendError naming b and nothing sent", err, tg.calls)
	}
}
