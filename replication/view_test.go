package replication

import (
	"fmt"
	"testing"
	"time"

	"github.com/cellserver/cellserver/cluster"
)

// TestReplicaFields: INFO replication on a leader lists every other member
// with its verdict's state, its offset and its lag in seconds; the members
// it reaches come first and are the ones connected_slaves counts.
func TestReplicaFields(t *testing.T) {
	m := func(id string, port int, health bool, state cluster.Health, applied uint64, contact, silence time.Duration) Member {
		return Member{ID: id, RespAddr: fmt.Sprintf("127.0.0.1:%d", port), Voter: true, Health: health, State: state,
			Reachable: state == cluster.HealthOnline || state == cluster.HealthLoading, LastIndex: applied + 2, AppliedIndex: applied, LastContact: contact, Silence: silence}
	}
	tests := []struct {
		name    string
		members []Member
		want    [][2]string
	}{
		{"all online", []Member{
			m("n1", 7001, true, cluster.HealthOnline, 90, 0, 0),
			m("n2", 7002, true, cluster.HealthOnline, 88, 400*time.Millisecond, 400*time.Millisecond),
			m("n3", 7003, true, cluster.HealthOnline, 90, 1500*time.Millisecond, 1500*time.Millisecond),
		}, [][2]string{
			{"slave0", "ip=127.0.0.1,port=7002,state=online,offset=88,lag=0"},
			{"slave1", "ip=127.0.0.1,port=7003,state=online,offset=90,lag=1"},
			{"connected_slaves", "2"},
		}},
		{"one down, one catching up", []Member{
			m("n1", 7001, true, cluster.HealthOnline, 90, 0, 0),
			m("n2", 7002, true, cluster.HealthFailed, 70, 20*time.Second, 20*time.Second),
			m("n3", 7003, true, cluster.HealthLoading, 3, 100*time.Millisecond, 100*time.Millisecond),
			m("n4", 7004, true, cluster.HealthSuspect, 0, -1, 2*time.Second),
		}, [][2]string{
			{"slave0", "ip=127.0.0.1,port=7003,state=send_bulk,offset=3,lag=0"},
			{"slave1", "ip=127.0.0.1,port=7002,state=disconnected,offset=70,lag=20"},
			{"slave2", "ip=127.0.0.1,port=7004,state=disconnected,offset=0,lag=-1"},
			{"connected_slaves", "1"},
		}},
		{"not judged yet", []Member{
			m("n1", 7001, false, cluster.HealthUnknown, 0, 0, 0),
			m("n2", 7002, false, cluster.HealthUnknown, 0, 0, 0),
		}, [][2]string{
			{"slave0", "ip=127.0.0.1,port=7002,state=unknown,offset=0,lag=-1"},
			{"connected_slaves", "0"},
		}},
	}
	for _, tc := range tests {
		got := ReplicaFields("n1", tc.members)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: ReplicaFields = %v\nwant %v", tc.name, got, tc.want)
		}
	}
}
