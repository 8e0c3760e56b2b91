package cluster

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
)

// TestParseMigrate: MIGRATE's options, its keys (an AUTH password that
// reads "keys" is no KEYS option; a key named twice is sent once) and its
// refusals.
func TestParseMigrate(t *testing.T) {
	args := func(s string) [][]byte {
		var a [][]byte
		for _, f := range strings.Split(s, " ") {
			if f == `""` {
				f = ""
			}
			a = append(a, []byte(f))
		}
		return a
	}
	cases := []struct {
		call string
		want string // fmt of Addr DB Timeout Copy Replace Auth Keys
		err  error
	}{
		{"MIGRATE h 1 k 0 500", "h:1 0 500ms false false [] [k]", nil},
		{"MIGRATE h 1 k 3 0 COPY REPLACE", "h:1 3 1s true true [] [k]", nil},
		{"MIGRATE h 1 k 0 99999999", "h:1 0 1h0m0s false false [] [k]", nil},
		{`MIGRATE h 1 "" 0 10 AUTH keys KEYS a b a`, "h:1 0 10ms false false [keys] [a b]", nil},
		{`MIGRATE h 1 "" 0 10 AUTH2 u p KEYS a`, "h:1 0 10ms false false [u p] [a]", nil},
		{`MIGRATE h 1 "" 0 10`, "h:1 0 10ms false false [] []", nil},
		{"MIGRATE h 1 k 0 10 KEYS a", "", ErrMigrateKeysArg},
		{"MIGRATE h 1 k 0 10 AUTH", "", engine.ErrSyntax},
		{"MIGRATE h 1 k 0 10 AUTH2 u", "", engine.ErrSyntax},
		{"MIGRATE h 1 k 0 10 NOPE", "", engine.ErrSyntax},
		{"MIGRATE h 1 k x 10", "", engine.ErrNotInteger},
	}
	for _, tc := range cases {
		m, err := ParseMigrate(args(tc.call))
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%s: err %v, want %v", tc.call, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.call, err)
			continue
		}
		got := fmt.Sprintf("%s %d %v %v %v %s %s", m.Addr, m.DB, m.Timeout, m.Copy, m.Replace, m.Auth, m.Keys)
		if got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.call, got, tc.want)
		}
		if m.Timeout <= 0 || m.Timeout > time.Hour {
			t.Errorf("%s: timeout %v out of (0, 1h]", tc.call, m.Timeout)
		}
	}
}
