package cluster

import (
	"errors"
	"strings"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/shards"
	"github.com/cellserver/cellserver/snapshot"
)

// Refusals of RESTORE's arguments, worded by resp/errors.go (a payload
// that does not decode is refused with snapshot's errors).
var (
	// ErrRestoreTTL: a negative ttl.
	ErrRestoreTTL = errors.New("cluster: invalid RESTORE TTL value")
	// ErrRestoreFreq: FREQ outside [0, 255].
	ErrRestoreFreq = errors.New("cluster: invalid RESTORE FREQ value")
	// ErrRestoreIdle: a negative IDLETIME.
	ErrRestoreIdle = errors.New("cluster: invalid RESTORE IDLETIME value")
)

// PrepareRestore parses RESTORE key ttl serialized-value [REPLACE]
// [ABSTTL] [IDLETIME seconds] [FREQ frequency] (args[0] the name) into
// op, an OpRestore of the decoded DUMP payload (snapshot.DecodeDump). The
// ttl is checked and otherwise ignored, as are IDLETIME and FREQ, as
// Redis does: the payload carries the state's own expiry.
func PrepareRestore(args [][]byte, op *shards.Op) error {
	ttl, err := engine.ParseInt(args[2])
	if err != nil {
		return err
	}
	if ttl < 0 {
		return ErrRestoreTTL
	}
	op.Replace = false
	for i := 4; i < len(args); i++ {
		switch strings.ToLower(string(args[i])) {
		case "replace":
			op.Replace = true
		case "absttl":
		case "idletime", "freq":
			if i+1 >= len(args) {
				return engine.ErrSyntax
			}
			if err := checkRestoreOption(args[i], args[i+1]); err != nil {
				return err
			}
			i++
		default:
			return engine.ErrSyntax
		}
	}
	st, err := snapshot.DecodeDump(args[3])
	if err != nil {
		return err
	}
	op.Code = shards.OpRestore
	op.Keys = append(op.Keys, args[1])
	op.State = st
	return nil
}

// checkRestoreOption checks the value of RESTORE's IDLETIME or FREQ
// (name).
func checkRestoreOption(name, value []byte) error {
	v, err := engine.ParseInt(value)
	if err != nil {
		return err
	}
	if strings.EqualFold(string(name), "freq") {
		if v < 0 || v > 255 {
			return ErrRestoreFreq
		}
	} else if v < 0 {
		return ErrRestoreIdle
	}
	return nil
}
