// Package acllog owns ACL LOG's model: the refused authentications, newest
// first, a failure grouped into a recent entry of the same reason,
// context, object, user and client address (as Redis groups them, plus
// the address), at most MaxLen entries. Building the client's description
// and replying are the server's (resp's cmd_acl.go).
//
// It must never import resp (or any package of the server). Like every
// internal package it imports nothing of the project but engine and other
// internal packages (checked by internal/layers).
package acllog
