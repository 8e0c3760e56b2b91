// Package authguard owns the defences against password guessing: the
// failed authentications counted per address (an IP, an IPv6 client's
// /64), the wait each attempt from an address earns before its password
// is checked, the bound on how far ahead they are scheduled, the bound on
// the addresses tracked, one attempt's course (Attempt: wait, check,
// count, and whether the connection is to be closed) and which peers are
// local (protected mode). Running the wait, checking the password and
// closing the connection are the server's (resp's authguard.go), given to
// Attempt as functions.
//
// It must never import resp (or any package of the server). Like every
// internal package it imports nothing of the project but engine and other
// internal packages (checked by internal/layers).
package authguard
