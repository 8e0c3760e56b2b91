package region

import (
	"errors"
	"fmt"
)

// Sentinel errors. The wire layer words each of them.
var (
	// ErrMixedModes is returned for CL.THROTTLEALL whose keys fall under
	// different region modes (or global keys with different homes):
	// one atomic decision cannot span them. Nothing is consumed.
	ErrMixedModes = errors.New("region: the keys of one command fall under different region modes")
	// ErrGlobalInTransaction is returned for a limiter command inside
	// MULTI/EXEC on a key whose home is another region: the transaction's
	// atomicity cannot extend to a decision taken there.
	ErrGlobalInTransaction = errors.New("region: a key decided in another region cannot be part of a transaction")
	// ErrLeaseMode is returned for CC.ACQUIRE, CC.RELEASE or CC.RENEW on
	// a key whose region mode is async: each region would make its own
	// lease ids, and a peer's shipped consumption could never be released.
	// Nothing is consumed.
	ErrLeaseMode = errors.New("region: in-flight (CC.*) keys are decided under the local, split and global modes, not async: a lease taken in one region could not be released in the others")
	// ErrWrongRegion is returned to a peer that names as its target a
	// region other than this one.
	ErrWrongRegion = errors.New("region: wrong region name")
	// ErrUnknownPeer is returned to a peer whose origin is not a
	// configured region-peer.
	ErrUnknownPeer = errors.New("region: unknown origin region")
	// ErrNotConfigured is returned by the peer-facing commands on a server
	// with no region configured.
	ErrNotConfigured = errors.New("region: no region is configured")
	// ErrBadBatch is returned for a peer command whose arguments do not
	// form valid operations (nothing is applied).
	ErrBadBatch = errors.New("region: malformed peer operation")
	// ErrSequenceRecord is returned for a limiter command that would
	// change a region:seq: key: the record of a peer's batches, written
	// only by REGION.APPLY (nothing is consumed).
	ErrSequenceRecord = errors.New("region: region:seq: keys record the batches applied from peer regions and change only by REGION.APPLY")
)

// SequenceError is the answer to a peer's batch of async consumption that
// skips some of its lane: batch Seq arrived while the lane's record says
// Expected (< Seq) is the next. Nothing is applied; the sender sends its
// batch again as Expected. (A batch already applied is no error: it is
// answered as a duplicate.)
type SequenceError struct {
	Expected, Seq int64
}

func (e *SequenceError) Error() string {
	return fmt.Sprintf("region: batch %d is out of sequence: its lane expects batch %d", e.Seq, e.Expected)
}

// UnreachableError is the answer for a global key whose home region did
// not answer, under region-unreachable error.
type UnreachableError struct {
	// Region is the home region's name.
	Region string
	// Err is the last failure talking to it.
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("region %s is unreachable: %v", e.Region, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// RemoteError is an error reply of a peer region to a forwarded command,
// already in the wire's wording (WRONGTYPE ..., ERR ...): relayed verbatim.
type RemoteError struct {
	// Region is the peer that answered.
	Region string
	// Msg is its reply, without the leading '-'.
	Msg string
}

func (e *RemoteError) Error() string { return e.Msg }
