package main

import (
	"fmt"
	"log/slog"
)

// reservedFDs is how many file descriptors the server keeps for itself
// beyond one per client (Redis's CONFIG_MIN_RESERVED_FDS): listeners, the
// metrics and pprof listeners, snapshot files, the raft transport and log
// store, standard streams.
const reservedFDs = 32

// fdPlan is what the server does about RLIMIT_NOFILE for a maxclients.
type fdPlan struct {
	// Soft is the soft limit to set (the current one when no change is
	// needed or possible).
	Soft uint64
	// MaxClients is the maxclients the limit allows: the requested one, or
	// less when the hard limit is too low.
	MaxClients int
}

// planFDs returns how to fit maxclients clients plus reservedFDs under
// the descriptor limits soft and hard (hard may be unlimited: ^uint64(0)).
// The soft limit is raised as far as needed and the hard limit allows; when
// even the hard limit is too low, maxclients is lowered to fit. It fails
// when the limit leaves no descriptor for a client.
func planFDs(requested int, soft, hard uint64) (fdPlan, error) {
	want := uint64(requested) + reservedFDs
	switch {
	case soft >= want:
		return fdPlan{Soft: soft, MaxClients: requested}, nil
	case hard >= want:
		return fdPlan{Soft: want, MaxClients: requested}, nil
	}
	best := max(soft, hard)
	if best <= reservedFDs {
		return fdPlan{}, fmt.Errorf("the open files limit (ulimit -n) of %d is not enough for the server to start: it needs more than %d", best, reservedFDs)
	}
	return fdPlan{Soft: best, MaxClients: int(best - reservedFDs)}, nil
}

// reducedWarning is the start-up warning when maxclients had to be lowered
// (Redis's wording).
func reducedWarning(requested int, p fdPlan) string {
	return fmt.Sprintf("You requested maxclients of %d requiring at least %d max file descriptors. "+
		"Server can't set maximum open files to %d because of OS error: the hard limit is %d. "+
		"Current maximum open files is %d. maxclients has been reduced to %d to compensate for low ulimit. "+
		"If you need higher maxclients increase 'ulimit -n'.",
		requested, requested+reservedFDs, requested+reservedFDs, p.Soft, p.Soft, p.MaxClients)
}

// fitMaxClients makes room for cfg.MaxClients clients under the descriptor
// limit, or lowers cfg.MaxClients to what fits, with a warning.
func fitMaxClients(cfg *Config, logger *slog.Logger) error {
	p, err := fitOpenFiles(cfg.MaxClients)
	if err != nil {
		return err
	}
	if p.MaxClients < cfg.MaxClients {
		logger.Warn(reducedWarning(cfg.MaxClients, p))
		cfg.MaxClients = p.MaxClients
	}
	return nil
}
