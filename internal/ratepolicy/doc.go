// Package ratepolicy derives the quota (q) and window (w) of a
// RateLimit-Policy item (draft-ietf-httpapi-ratelimit-headers) from a
// limiter's shape. It is the one derivation the HTTP middleware
// (httplimit) and Envoy's rate-limit service (rls) both use, so that one
// limit is advertised the same way through either front door; docs/http.md
// explains it.
//
// q is what the RateLimit field's r counts down from and what its t
// restores: the most requests a fresh key admits at once (the reply's
// limit). w is the time an exhausted key takes to get all of q back at the
// sustained rate, so q/w is that rate; for a window limiter, w is the
// window. Every function is pure and safe for concurrent use.
//
// Like every internal package it imports nothing of the project but
// engine and other internal packages, so any layer may use it (the rule
// is checked by internal/layers).
package ratepolicy
