// Package test holds cellserver's end-to-end tests: they build the real
// binary, start it on free loopback ports, and drive it with real clients
// (go-redis v9, redis-cli, redis-benchmark) and raw sockets.
//
// docs_test.go runs the README's console examples (and docs/commands.md's
// fresh-key example, docs/http.md's curl example) and compares every reply
// with the docs: a value that depends on the clock is marked in the docs by
// an HTML comment before its block, "<!-- doc-test: 2.4=0..4000 -->"
// (command 2, reply line 4, any integer from 0 to 4000).
package test
