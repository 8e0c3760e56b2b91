// Package test holds cellserver's end-to-end tests: they build the real
// binary, start it on free loopback ports, and drive it with real clients
// (go-redis v9, redis-cli, redis-benchmark) and raw sockets.
package test
