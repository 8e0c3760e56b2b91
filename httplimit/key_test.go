package httplimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/cellserver/cellserver/httplimit"
)

func TestByIP(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	for _, tc := range []struct {
		name    string
		remote  string
		xff     []string
		trusted []netip.Prefix
		want    string
		ok      bool
	}{
		{"direct", "192.0.2.1:1234", nil, nil, "ip:192.0.2.1", true},
		{"forwarded-for ignored without trusted proxies", "192.0.2.1:1234", []string{"198.51.100.7"}, nil, "ip:192.0.2.1", true},
		{"forwarded-for ignored from an untrusted peer", "192.0.2.1:1234", []string{"198.51.100.7"}, proxies, "ip:192.0.2.1", true},
		{"one trusted proxy", "10.0.0.1:80", []string{"198.51.100.7"}, proxies, "ip:198.51.100.7", true},
		{"right-most untrusted entry", "10.0.0.1:80", []string{"203.0.113.9, 198.51.100.7, 10.1.1.1"}, proxies, "ip:198.51.100.7", true},
		{"a spoofed left part is not used", "10.0.0.1:80", []string{"1.2.3.4, 198.51.100.7"}, proxies, "ip:198.51.100.7", true},
		{"several field lines, last first", "10.0.0.1:80", []string{"203.0.113.9", "10.2.2.2,  "}, proxies, "ip:203.0.113.9", true},
		{"all trusted: left-most", "10.0.0.1:80", []string{"10.3.3.3, 10.2.2.2"}, proxies, "ip:10.3.3.3", true},
		{"no header: the proxy", "10.0.0.1:80", nil, proxies, "ip:10.0.0.1", true},
		{"garbage stops at the last trusted hop", "10.0.0.1:80", []string{"198.51.100.7, unknown, 10.2.2.2"}, proxies, "ip:10.2.2.2", true},
		{"entries with ports", "10.0.0.1:80", []string{"198.51.100.7:5555"}, proxies, "ip:198.51.100.7", true},
		{"ipv6 keyed by /64", "[2001:db8:1:2:3:4:5:6]:443", nil, nil, "ip:2001:db8:1:2::/64", true},
		{"ipv6 behind an ipv6 proxy", "[fd00::1]:443", []string{"[2001:db8:9:9::1]:1"}, proxies, "ip:2001:db8:9:9::/64", true},
		{"ipv4-mapped is ipv4", "[::ffff:192.0.2.1]:80", nil, nil, "ip:192.0.2.1", true},
		{"mapped proxy prefix", "10.0.0.1:80", []string{"198.51.100.7"}, []netip.Prefix{netip.MustParsePrefix("::ffff:10.0.0.0/104")}, "ip:198.51.100.7", true},
		{"zone dropped", "[fe80::1%eth0]:80", nil, nil, "ip:fe80::/64", true},
		{"unix socket", "@", nil, nil, "", false},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = tc.remote
		for _, v := range tc.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		got, ok := httplimit.ByIP(tc.trusted...)(r)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: ByIP = %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

type userKey struct{}

func TestKeyHelpers(t *testing.T) {
	user := func(r *http.Request) (string, bool) {
		id, ok := r.Context().Value(userKey{}).(string)
		return id, ok
	}
	key := httplimit.FirstKey(httplimit.ByUser(user), httplimit.ByHeader("X-Api-Key"), httplimit.ByIP())
	for _, tc := range []struct {
		name   string
		user   string
		apiKey string
		want   string
	}{
		{"user first", "42", "k", "user:42"},
		{"then the header", "", " k-1 ", "x-api-key:k-1"},
		{"then the address", "", "", "ip:192.0.2.1"},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil) // RemoteAddr 192.0.2.1:1234
		if tc.user != "" {
			r = r.WithContext(context.WithValue(r.Context(), userKey{}, tc.user))
		}
		if tc.apiKey != "" {
			r.Header.Set("X-Api-Key", tc.apiKey)
		}
		if got, ok := key(r); got != tc.want || !ok {
			t.Errorf("%s: key = %q, %v; want %q", tc.name, got, ok, tc.want)
		}
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	if k, ok := httplimit.FirstKey(httplimit.ByUser(user), httplimit.ByHeader("X-Api-Key"))(r); ok {
		t.Errorf("FirstKey with no key = %q, want none", k)
	}
}
