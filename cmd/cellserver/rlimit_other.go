//go:build !unix

package main

// fitOpenFiles leaves maxclients as configured where descriptor limits are
// not POSIX rlimits.
func fitOpenFiles(maxclients int) (fdPlan, error) { return fdPlan{MaxClients: maxclients}, nil }

// liveMaxClients accepts any maxclients where descriptor limits are not
// POSIX rlimits.
func liveMaxClients(int) error { return nil }
