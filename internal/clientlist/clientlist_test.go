package clientlist

import (
	"errors"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/engine"
)

func TestAppendLine(t *testing.T) {
	c := Client{ID: 7, Addr: "127.0.0.1:5000", LAddr: "127.0.0.1:6379", Name: "w", Age: 3, Idle: -1,
		Multi: 2, MultiMem: 180, NoEvict: true, OutMem: 5, TotMem: 900, Cmd: "client|list", Proto: 3, LibName: "go-redis", LibVer: "9"}
	want := "id=7 addr=127.0.0.1:5000 laddr=127.0.0.1:6379 fd=-1 name=w age=3 idle=0 flags=xe db=0 sub=0 psub=0 ssub=0 multi=2 " +
		"watch=0 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=180 rbs=0 rbp=0 obl=0 oll=0 omem=5 tot-mem=900 events=r cmd=client|list " +
		"user=default redir=-1 resp=3 lib-name=go-redis lib-ver=9\n"
	if got := string(c.AppendLine([]byte("x"))); got != "x"+want {
		t.Errorf("AppendLine =\n%q, want\n%q", got, "x"+want)
	}
	for _, tc := range []struct {
		multi   int64
		noEvict bool
		want    string
	}{{-1, false, "N"}, {-1, true, "e"}, {0, false, "x"}} {
		c := Client{Multi: tc.multi, NoEvict: tc.noEvict}
		if got := string(c.AppendLine(nil)); !strings.Contains(got, " flags="+tc.want+" ") {
			t.Errorf("multi %d no-evict %v: line %q, want flags=%s", tc.multi, tc.noEvict, got, tc.want)
		}
	}
}

func words(s string) [][]byte {
	var out [][]byte
	for _, w := range strings.Fields(s) {
		out = append(out, []byte(w))
	}
	return out
}

func TestParseKill(t *testing.T) {
	me := &Client{ID: 1, Addr: "a:1", LAddr: "l:1", Age: 10}
	other := &Client{ID: 2, Addr: "a:2", LAddr: "l:1", Age: 100}
	for _, tc := range []struct {
		args      string
		err       error
		me, other bool
	}{
		{"", nil, false, true},
		{"skipme no", nil, true, true},
		{"ID 2", nil, false, true},
		{"addr a:1 skipme NO", nil, true, false},
		{"laddr l:1 maxage 50", nil, false, true},
		{"type normal user default", nil, false, true},
		{"type pubsub", nil, false, false},
		{"user alice", nil, false, false},
		{"id 0", ErrKillID, false, false},
		{"maxage -1", engine.ErrSyntax, false, false},
		{"skipme maybe", engine.ErrSyntax, false, false},
		{"id", engine.ErrSyntax, false, false},
		{"color red", engine.ErrSyntax, false, false},
	} {
		f, err := ParseKill(words(tc.args))
		if err != tc.err {
			t.Errorf("ParseKill(%q) error = %v, want %v", tc.args, err, tc.err)
			continue
		}
		if err == nil && (f.Match(me, true) != tc.me || f.Match(other, false) != tc.other) {
			t.Errorf("ParseKill(%q) matches me %v, other %v; want %v, %v", tc.args, f.Match(me, true), f.Match(other, false), tc.me, tc.other)
		}
	}
	var te *TypeError
	if _, err := ParseKill(words("type robot")); !errors.As(err, &te) || te.Given != "robot" {
		t.Errorf("ParseKill(type robot) = %v, want a TypeError naming robot", err)
	}
}

func TestParseList(t *testing.T) {
	for _, tc := range []struct {
		args   string
		err    error
		listed []int64
	}{
		{"", nil, []int64{1, 2, 3}},
		{"TYPE normal", nil, []int64{1, 2, 3}},
		{"type replica", nil, nil},
		{"id 1 3", nil, []int64{1, 3}},
		{"type normal id 2", nil, []int64{2}},
		{"id 1 x", ErrListID, nil},
		{"id 0", ErrListID, nil},
		{"type", engine.ErrSyntax, nil},
	} {
		l, err := ParseList(words(tc.args))
		if err != tc.err {
			t.Errorf("ParseList(%q) error = %v, want %v", tc.args, err, tc.err)
			continue
		}
		if err != nil {
			continue
		}
		var got []int64
		for id := int64(1); id <= 3; id++ {
			if l.Match(id) {
				got = append(got, id)
			}
		}
		if len(got) != len(tc.listed) || (len(got) > 0 && got[len(got)-1] != tc.listed[len(tc.listed)-1]) {
			t.Errorf("ParseList(%q) lists %v, want %v", tc.args, got, tc.listed)
		}
	}
}

func TestValidName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{{"worker-1", true}, {"", true}, {"a b", false}, {"a\nb", false}, {"caf\xc3\xa9", false}} {
		if got := ValidName([]byte(tc.name)); got != tc.ok {
			t.Errorf("ValidName(%q) = %v, want %v", tc.name, got, tc.ok)
		}
	}
}
