//go:build !unix

package main

// fitOpenFiles leaves maxclients as configured where descriptor limits are
// not POSIX rlimits.
func fitOpenFiles(maxclients, _ int) (fdPlan, error) { return fdPlan{MaxClients: maxclients}, nil }

// liveMaxClients accepts any maxclients where descriptor limits are not
// POSIX rlimits.
func liveMaxClients(int) func(int) error { return func(int) error { return nil } }
