package main

import (
	"fmt"
	"log/slog"
)

// reservedFDs is how many file descriptors the server keeps for itself
// beyond one per client (Redis's CONFIG_MIN_RESERVED_FDS): listeners, the
// metrics and pprof listeners, snapshot files, the raft log store,
// standard streams.
const reservedFDs = 32

// raftPeerFDs is what a cluster node keeps for its established raft-port
// connections (raft's pool and the forwarding service's, to and from each
// member and the other groups' leaders), beyond raft-max-handshakes.
const raftPeerFDs = 64

// reservedFor is the descriptors cfg keeps beyond one per client: a
// cluster node adds its raft port's (every handshake slot may hold a
// connection, so a flood there cannot take the clients' descriptors).
func reservedFor(cfg *Config) int {
	if !cfg.Cluster.enabled() {
		return reservedFDs
	}
	return reservedFDs + cfg.Cluster.Raft.MaxHandshakes + raftPeerFDs
}

// fdPlan is what the server does about RLIMIT_NOFILE for a maxclients.
type fdPlan struct {
	// Soft is the soft limit to set (the current one when no change is
	// needed or possible).
	Soft uint64
	// MaxClients is the maxclients the limit allows: the requested one, or
	// less when the hard limit is too low.
	MaxClients int
}

// planFDs returns how to fit maxclients clients plus reserved descriptors
// under the descriptor limits soft and hard (hard may be unlimited:
// ^uint64(0)). The soft limit is raised as far as needed and the hard limit
// allows; when even the hard limit is too low, maxclients is lowered to
// fit. It fails when the limit leaves no descriptor for a client.
func planFDs(requested, reserved int, soft, hard uint64) (fdPlan, error) {
	res := uint64(reserved)
	want := uint64(requested) + res
	switch {
	case soft >= want:
		return fdPlan{Soft: soft, MaxClients: requested}, nil
	case hard >= want:
		return fdPlan{Soft: want, MaxClients: requested}, nil
	}
	best := max(soft, hard)
	if best <= res {
		return fdPlan{}, fmt.Errorf("the open files limit (ulimit -n) of %d is not enough for the server to start: it needs more than %d", best, res)
	}
	return fdPlan{Soft: best, MaxClients: int(best - res)}, nil
}

// reducedWarning is the start-up warning when maxclients had to be lowered
// (Redis's wording).
func reducedWarning(requested, reserved int, p fdPlan) string {
	return fmt.Sprintf("You requested maxclients of %d requiring at least %d max file descriptors. "+
		"Server can't set maximum open files to %d because of OS error: the hard limit is %d. "+
		"Current maximum open files is %d. maxclients has been reduced to %d to compensate for low ulimit. "+
		"If you need higher maxclients increase 'ulimit -n'.",
		requested, requested+reserved, requested+reserved, p.Soft, p.Soft, p.MaxClients)
}

// fitMaxClients makes room for cfg.MaxClients clients under the descriptor
// limit, or lowers cfg.MaxClients to what fits, with a warning.
func fitMaxClients(cfg *Config, logger *slog.Logger) error {
	p, err := fitOpenFiles(cfg.MaxClients, reservedFor(cfg))
	if err != nil {
		return err
	}
	if p.MaxClients < cfg.MaxClients {
		logger.Warn(reducedWarning(cfg.MaxClients, reservedFor(cfg), p))
		cfg.MaxClients = p.MaxClients
	}
	return nil
}
