package rls

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/cellserver/cellserver/internal/ratepolicy"
)

// HeaderMode chooses the response headers a reply asks Envoy to add
// (response_headers_to_add). They describe one descriptor: among the
// enforced ones, one over its limit with the least remaining, else the one
// with the least remaining; quota-mode ones only when no enforced one
// matched or they decided the outcome; never a shadow-mode one.
type HeaderMode int32

// The header modes.
const (
	// HeadersOff adds no header.
	HeadersOff HeaderMode = iota
	// HeadersIETF adds the IETF fields (draft-ietf-httpapi-ratelimit-headers):
	//   RateLimit-Policy: "<name>";q=<quota>;w=<window in seconds>
	//   RateLimit: "<name>";r=<remaining>;t=<seconds until reset>
	// with <name> the rule's name or "default", and q and w derived as the
	// HTTP middleware derives them (internal/ratepolicy, docs/http.md): for
	// GCRA, q is the burst (requests_per_unit unless burst is set) and w the
	// time an exhausted key takes to get q back at requests_per_unit per
	// unit; for the windows, q is requests_per_unit and w the unit.
	HeadersIETF
	// HeadersLegacy adds X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset (seconds), as envoyproxy/ratelimit's
	// LIMIT_RESPONSE_HEADERS_ENABLED does.
	HeadersLegacy
)

// HeaderModes are the modes' names, in order: "off", "ietf", "legacy".
var HeaderModes = []string{"off", "ietf", "legacy"}

// ParseHeaderMode returns the mode named s (as HeaderModes spells it).
func ParseHeaderMode(s string) (HeaderMode, error) {
	for i, w := range HeaderModes {
		if strings.EqualFold(s, w) {
			return HeaderMode(i), nil
		}
	}
	return HeadersOff, fmt.Errorf("rls: unknown response headers mode %q (off, ietf or legacy)", s)
}

// String returns the mode's name.
func (m HeaderMode) String() string {
	if m >= 0 && int(m) < len(HeaderModes) {
		return HeaderModes[m]
	}
	return "unknown"
}

// headerValues are what the headers report. Durations are nanoseconds.
type headerValues struct {
	name             string
	limit, remaining int64 // limit: requests_per_unit (X-RateLimit-Limit, as envoyproxy/ratelimit)
	policy           ratepolicy.Item
	reset            int64
	retry            int64 // -1: no Retry-After
}

// policyItem returns the q and w of l's RateLimit-Policy item.
func (l *Limit) policyItem() ratepolicy.Item {
	if l.Algorithm == GCRA {
		return ratepolicy.Bucket(l.Burst, int64(l.RequestsPerUnit), time.Duration(l.Period))
	}
	return ratepolicy.Window(int64(l.RequestsPerUnit), time.Duration(l.Period))
}

// ceilSeconds rounds ns up to whole seconds, so that a client never
// retries early.
func ceilSeconds(ns int64) int64 { return (ns + 1e9 - 1) / 1e9 }

// appendHeaders appends mode's headers for v to hs. Over the limit
// (v.retry >= 0) a Retry-After header in whole seconds is added too.
func appendHeaders(hs []*core.HeaderValue, mode HeaderMode, v headerValues) []*core.HeaderValue {
	add := func(k, val string) { hs = append(hs, &core.HeaderValue{Key: k, Value: val}) }
	reset := strconv.FormatInt(ceilSeconds(v.reset), 10)
	switch mode {
	case HeadersIETF:
		name := sfString(v.name)
		add("RateLimit-Policy", name+";q="+strconv.FormatInt(v.policy.Q, 10)+";w="+strconv.FormatInt(v.policy.W, 10))
		add("RateLimit", name+";r="+strconv.FormatInt(v.remaining, 10)+";t="+reset)
	case HeadersLegacy:
		add("X-RateLimit-Limit", strconv.FormatInt(v.limit, 10))
		add("X-RateLimit-Remaining", strconv.FormatInt(v.remaining, 10))
		add("X-RateLimit-Reset", reset)
	default:
		return hs
	}
	if v.retry >= 0 {
		add("Retry-After", strconv.FormatInt(ceilSeconds(v.retry), 10))
	}
	return hs
}

// sfString quotes name as a structured-field string (RFC 8941): printable
// ASCII only, '"' and '\' escaped; any other byte becomes '_'. An empty
// name is "default".
func sfString(name string) string {
	if name == "" {
		name = "default"
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('_')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
