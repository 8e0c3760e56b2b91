// Package outlimit owns the client-output-buffer-limit setting: its three
// client classes (only normal applies: cellserver has no replica or
// pub/sub clients), their hard and soft limits, the default, and its
// syntax and CONFIG GET form, and one client's pending bytes checked
// against them (the soft limit's clock: SoftDeadline, Check). Holding,
// writing and closing a client past a limit are the server's (resp's
// outbuf.go).
//
// It must never import resp (or any package of the server). Like every
// internal package it imports nothing of the project but engine and other
// internal packages (checked by internal/layers).
package outlimit
