package httplimit

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/netip"
	"strings"
)

// KeyFunc names the entity a request is counted against ("ip:192.0.2.1",
// "user:42"). ok false means the request has no such entity: the
// middleware passes it on without limiting it (combine KeyFuncs with
// FirstKey so that every request gets a key). A KeyFunc is called from
// many goroutines at once.
type KeyFunc func(r *http.Request) (key string, ok bool)

// ByIP keys a request by its client's IP address: "ip:<address>", or
// "ip:<network>/64" for IPv6, since one host usually holds a whole /64.
//
// The client is the connection's peer (Request.RemoteAddr) unless that
// peer is in trusted: then X-Forwarded-For is read from right to left
// (its last field line first), skipping the trusted hops, and the first
// untrusted address is the client. An entry that is not an address stops
// the walk at the last trusted hop; a chain that is trusted all the way
// gives its left-most address. With no trusted prefix, X-Forwarded-For is
// ignored, as it must be when clients reach the server directly: anyone
// can write the header. ok is false only when RemoteAddr is not an IP
// address (a unix socket).
func ByIP(trusted ...netip.Prefix) KeyFunc {
	trusted = append([]netip.Prefix(nil), trusted...)
	for i, p := range trusted {
		trusted[i] = netip.PrefixFrom(p.Addr().Unmap(), unmappedBits(p)).Masked()
	}
	return func(r *http.Request) (string, bool) {
		addr, ok := ClientIP(r, trusted...)
		if !ok {
			return "", false
		}
		if addr.Is6() {
			p, _ := addr.Prefix(64)
			return "ip:" + p.String(), true
		}
		return "ip:" + addr.String(), true
	}
}

// unmappedBits is p's length once an IPv4-mapped prefix is read as IPv4.
func unmappedBits(p netip.Prefix) int {
	if p.Addr().Is4In6() {
		return max(p.Bits()-96, 0)
	}
	return p.Bits()
}

// ClientIP returns the request's client address as ByIP determines it,
// without its zone and with IPv4-mapped IPv6 addresses as IPv4.
func ClientIP(r *http.Request, trusted ...netip.Prefix) (netip.Addr, bool) {
	addr, err := parseHop(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	if !isTrusted(addr, trusted) {
		return addr, true
	}
	values := r.Header.Values("X-Forwarded-For")
	for i := len(values) - 1; i >= 0; i-- {
		hops := strings.Split(values[i], ",")
		for j := len(hops) - 1; j >= 0; j-- {
			s := strings.TrimSpace(hops[j])
			if s == "" {
				continue
			}
			a, err := parseHop(s)
			if err != nil {
				return addr, true
			}
			if !isTrusted(a, trusted) {
				return a, true
			}
			addr = a
		}
	}
	return addr, true
}

// parseHop parses an address as RemoteAddr and X-Forwarded-For write it:
// "192.0.2.1", "192.0.2.1:1234", "2001:db8::1" or "[2001:db8::1]:1234".
func parseHop(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, err2 := netip.ParseAddrPort(s)
		if err2 != nil {
			return netip.Addr{}, err
		}
		a = ap.Addr()
	}
	return a.Unmap().WithZone(""), nil
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ByHeader keys a request by a header's value: "<lower-case name>:<value>"
// (surrounding spaces trimmed); ok is false when the header is absent or
// empty. Use it only for values the server checks (an API key validated
// before this middleware runs), since a client can send any value.
func ByHeader(name string) KeyFunc {
	prefix := strings.ToLower(name) + ":"
	return func(r *http.Request) (string, bool) {
		v := strings.TrimSpace(r.Header.Get(name))
		if v == "" {
			return "", false
		}
		return prefix + v, true
	}
}

// ByUser keys a request by its authenticated user: "user:<id>". user
// returns the id an authentication middleware placed in the request (its
// context), and false (or an empty id) for an anonymous request.
func ByUser(user func(r *http.Request) (id string, ok bool)) KeyFunc {
	return func(r *http.Request) (string, bool) {
		id, ok := user(r)
		if !ok || id == "" {
			return "", false
		}
		return "user:" + id, true
	}
}

// FirstKey returns the key of the first of fns that has one, so that
// FirstKey(ByUser(f), ByIP()) limits signed-in users by account and the
// others by address.
func FirstKey(fns ...KeyFunc) KeyFunc {
	fns = append([]KeyFunc(nil), fns...)
	return func(r *http.Request) (string, bool) {
		for _, f := range fns {
			if k, ok := f(r); ok {
				return k, true
			}
		}
		return "", false
	}
}

// maxVerbatimKey is the longest key stored as it is; longer ones are hashed.
const maxVerbatimKey = 128

// hashTag returns the part of a server key that goes between braces: the
// key itself when it is short, not empty, holds no brace and does not
// start with '=', or else "=" and the unpadded base64url SHA-256 of the
// key. The two forms cannot collide (only the second starts with '='),
// and the tag is never empty and never holds a brace, so every policy's
// key for one client shares the tag: a cluster routing by hash slot keeps
// them together for CL.THROTTLEALL, and a client's own bytes cannot split
// them.
func hashTag(key string) string {
	if key != "" && len(key) <= maxVerbatimKey && key[0] != '=' && !strings.ContainsAny(key, "{}") {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "=" + base64.RawURLEncoding.EncodeToString(sum[:])
}
