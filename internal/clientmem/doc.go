// Package clientmem owns the accounting behind maxmemory-clients, as Redis
// 7's client eviction: the setting (Limit: auto, a size or a share of
// maxmemory) and the bound it gives, the total the connected clients
// account for (Pool) and each one's share of it (Client: Track, Untrack,
// NoEvict), the signal that an eviction pass is wanted, the choice of
// which clients to evict (Choose: the largest first), one pass (Evict)
// and the loop of passes (Run, with its retry wait and Warn's throttle).
// Measuring a connection, finding the candidates and closing them are the
// server's (resp's clientmem.go).
//
// It must never import resp (or any package of the server). Like every
// internal package it imports nothing of the project but engine and other
// internal packages (checked by internal/layers).
package clientmem
