// Package clientlist is what CLIENT LIST and CLIENT INFO show of a
// connection — the fields of one line, in Redis's order, as data — and the
// filters of CLIENT KILL and CLIENT LIST (ids, types, addresses, age).
// resp reads a connection's state into a Client, and owns which
// connections there are and how one is closed; the error wording is
// resp's (errors.go).
//
// Like every internal package it imports nothing of the project but
// engine and other internal packages (checked by internal/layers); it
// must never import resp.
package clientlist
