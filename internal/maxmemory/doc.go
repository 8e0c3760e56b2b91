// Package maxmemory owns what happens when the keyspace is over maxmemory:
// the policies (noeviction, volatile-ttl), their names, and one check of
// the keyspace against the limit — for volatile-ttl, deleting the keys
// nearest to expiry in bounded batches until it is back under — and the
// Monitor that holds the limit and policy in force and runs the check on
// a timer. The decision path that deletes the keys and the refusal of
// growing writes (OOM) are the server's (resp's memory.go).
//
// It must never import resp (or any package of the server). Like every
// internal package it imports nothing of the project but engine and other
// internal packages (checked by internal/layers).
package maxmemory
