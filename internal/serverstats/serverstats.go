package serverstats

import (
	"time"

	"github.com/cellserver/cellserver/internal/keyclass"
	"github.com/cellserver/cellserver/internal/latency"
)

// CommandStats are one command's counters since the server started (or
// CONFIG RESETSTAT).
type CommandStats struct {
	// Name is the command's full name ("cl.throttle", "client|setname").
	Name string
	// Limiter is true for limiter commands (group ratelimit); Decides for
	// those whose calls are decisions (CL.INSPECT only looks).
	Limiter, Decides bool
	// Calls counts the calls that ran (including those that answered an
	// error); Rejected those refused before running (unknown subcommand,
	// arity, NOAUTH); Failed those that ran and answered an error.
	Calls, Rejected, Failed int64
	// Allowed and Limited count limiter decisions (a CL.THROTTLEALL call
	// is one decision).
	Allowed, Limited int64
	// Time is the total execution time.
	Time time.Duration
	// Latency is the histogram of execution times.
	Latency latency.Latency
}

// Stats is a snapshot of the server's counters.
type Stats struct {
	// Commands lists every command called, rejected or failed at least
	// once, in table order.
	Commands []CommandStats
	// Wait is the requests waiting for their turn (WAIT) and the
	// histogram of their waits.
	Wait WaitStats
	// ConnectedClients is the number of open client connections.
	ConnectedClients int64
	// ConnectionsReceived counts accepted connections, RejectedConnections
	// those refused by maxclients or protected mode, ProtectedModeDenied
	// those refused by protected mode.
	ConnectionsReceived, RejectedConnections, ProtectedModeDenied int64
	// AuthFailures counts failed AUTH and HELLO AUTH attempts
	// (acl_access_denied_auth), AuthClosed the clients closed for failing
	// too often.
	AuthFailures, AuthClosed int64
	// QueryBufferClosed and QueryTimeoutClosed count clients closed by
	// client-query-buffer-limit and by the query timeout.
	QueryBufferClosed, QueryTimeoutClosed int64
	// OutputBufferClosed counts clients closed by
	// client-output-buffer-limit.
	OutputBufferClosed int64
	// EvictedClients counts clients closed by maxmemory-clients;
	// ClientMemory is the memory the connected clients account for and
	// ClientMemoryLimit the bound in force (0: none), in bytes.
	EvictedClients, ClientMemory, ClientMemoryLimit int64
	// ErrorReplies counts error replies (total_error_replies).
	ErrorReplies int64
	// HotRequested and HotLimited are the heavy-hitter summaries' top keys
	// (internal/hotkeys, named by resp's hotkeys.go; nil when
	// hotkeys-capacity is 0).
	HotRequested, HotLimited []HotKey
	// Classes are the limiter decisions of each key class (nil while
	// off): configured rules first, then prefixes, then other.
	Classes []keyclass.Counts
	// TLSHandshakeFailures counts failed TLS handshakes
	// (resp's Config.TLSHandshakeFailures; 0 without TLS).
	TLSHandshakeFailures int64
	// EvictedKeys counts keys deleted by maxmemory's volatile-ttl policy.
	EvictedKeys int64
	// MaxMemory is the maxmemory setting (0: none); UsedMemory the bytes
	// the live keys need (shards' Store.UsedBytes, what maxmemory is
	// compared with); OOM is true while noeviction refuses new keys and
	// growth.
	MaxMemory, UsedMemory int64
	OOM                   bool
	// SlowlogLen is the number of SLOWLOG entries.
	SlowlogLen int
	// ShadowLimited counts limit-shadow requests that would have been
	// limited and were answered allowed: counted where each is applied,
	// so every node of a group counts the same (shards' Store.Shadowed).
	ShadowLimited uint64
	// LimitOverridden and ShadowRequests count the requests this node
	// received whose parameters a limit-override rule replaced, and that
	// it sent as shadow (limitpolicy's Stats).
	LimitOverridden, ShadowRequests uint64
	// ViolationsLogged and ViolationsSuppressed count the violations log's
	// lines and the limited decisions it left out (over its rate).
	ViolationsLogged, ViolationsSuppressed uint64
}

// WaitStats is a snapshot of the waiting requests, for the metrics.
type WaitStats struct {
	// Waiting is the requests waiting now.
	Waiting int64
	// Waited is the requests that waited and were answered, since start,
	// and WaitedSeconds the time they waited in total.
	Waited        int64
	WaitedSeconds float64
	// Bounds are the histogram's upper bounds in seconds; Counts[i] the
	// waits of at most Bounds[i] (not cumulative), the last one the
	// longer ones.
	Bounds []float64
	Counts []int64
}

// HotKey is one key of a heavy-hitter summary: its estimated count since
// the summary started; the true count lies within Count ± Err (see
// resp's scale).
type HotKey struct {
	Key        string
	Command    string // the limiter command that named it
	Count, Err uint64
}
