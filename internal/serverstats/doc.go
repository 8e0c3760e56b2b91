// Package serverstats owns a server's statistics as a report: the
// per-command counters each connection keeps (Counters), those of the
// requests that waited for their turn (WaitCounters), the snapshot of
// the server's counters that resp's Server.Stats returns and the metrics
// export (Stats), and INFO — its sections, their order and default set,
// the selection by INFO's arguments (Select) and the wording of every
// field (Append over an Info snapshot). The server gathers the values;
// this package decides nothing and reads nothing of the server, only the
// Go runtime's facts (ReadProcess).
//
// It must never import resp (or any package of the server: readers of the
// counters, such as metrics, need not import resp). Like every internal
// package it imports nothing of the project but engine and other internal
// packages (checked by internal/layers).
package serverstats
