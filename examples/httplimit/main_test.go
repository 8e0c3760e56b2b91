package main

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"
)

func TestDialAny(t *testing.T) {
	live, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()

	dial := dialAny([]string{deadAddr, live.Addr().String()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 2 { // the second dial starts from the node that answered
		c, err := dial(ctx, "tcp", "ignored:1")
		if err != nil {
			t.Fatalf("dial %d: %v", i+1, err)
		}
		if got := c.RemoteAddr().String(); got != live.Addr().String() {
			t.Errorf("dial %d reached %s, want %s", i+1, got, live.Addr())
		}
		c.Close()
	}
	if _, err := dialAny([]string{deadAddr})(ctx, "tcp", ""); err == nil {
		t.Error("dialling only a dead node succeeded")
	}
}

func TestSplitList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"a", []string{"a"}},
		{" a , b,,c ", []string{"a", "b", "c"}},
	} {
		if got := splitList(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("splitList(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
