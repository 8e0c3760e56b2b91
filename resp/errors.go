package resp

import (
	"errors"
	"strconv"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/replication"
	"github.com/cellserver/cellserver/shards"
)

// Errors of the wire layer. Their reply texts are Redis's, made in
// appendErrorText.
var (
	// ErrNoAuth is returned for a command other than AUTH, HELLO and QUIT on
	// a connection that has not authenticated while a password is required.
	ErrNoAuth = errors.New("authentication required")
	// ErrWrongPass is returned by AUTH and HELLO AUTH for a wrong user name
	// or password.
	ErrWrongPass = errors.New("invalid username-password pair")
	// ErrNoPasswordSet is returned by AUTH with a password when none is
	// configured.
	ErrNoPasswordSet = errors.New("no password is configured")
	// ErrHelloNoAuth is returned by HELLO without AUTH on a connection that
	// must authenticate first.
	ErrHelloNoAuth = errors.New("HELLO needs authentication")
	// ErrNoProto is returned by HELLO for a protocol version other than 2 or 3.
	ErrNoProto = errors.New("unsupported protocol version")
	// ErrDBIndex is returned by SELECT for a database other than 0.
	ErrDBIndex = errors.New("DB index is out of range")
	// ErrMaxClients is sent to a connection refused by --maxclients.
	ErrMaxClients = errors.New("max number of clients reached")
	// ErrInvalidCursor is returned by SCAN for a cursor that is not an
	// unsigned integer.
	ErrInvalidCursor = errors.New("invalid cursor")
	// ErrPersistenceOff is returned by SAVE, BGSAVE and SHUTDOWN SAVE when
	// the server runs without persistence.
	ErrPersistenceOff = errors.New("persistence is off")
	// ErrShutdownFailed is returned by SHUTDOWN when the final save failed
	// (the server keeps running).
	ErrShutdownFailed = errors.New("errors trying to shutdown")
	// ErrProtectedMode is sent, before the connection is closed, to a
	// client of another host while protected-mode is yes and no password
	// is set.
	ErrProtectedMode = errors.New("protected mode: clients of other hosts need a password")
	// ErrAuthThrottled is returned by AUTH and HELLO AUTH, unchecked and
	// before the connection is closed, when the client's address has
	// failed so often that its attempts are scheduled too far ahead (or
	// the server stops during the wait).
	ErrAuthThrottled = errors.New("too many failed authentication attempts")
)

// Errors of cluster routing (route.go), worded in appendErrorText.
var (
	// errCrossSlot is returned for a command whose keys hash to several
	// slots not all served by this node's group.
	errCrossSlot = errors.New("keys in request don't hash to the same slot")
	// errSlotNotServed is returned for a command on a slot no group owns,
	// or whose owner has no known member.
	errSlotNotServed = errors.New("hash slot not served")
)

// redirectError is a MOVED or ASK redirection: slot is served by the node
// at addr (host:port).
type redirectError struct {
	ask  bool
	slot int
	addr string
}

func (e *redirectError) Error() string { return "redirect to " + e.addr }

// unknownNodeError is a cluster node id no known group has.
type unknownNodeError struct{ id string }

func (e *unknownNodeError) Error() string { return "unknown node " + e.id }

// arityError is a command called with the wrong number of arguments.
type arityError struct{ name string }

func (e *arityError) Error() string { return "wrong number of arguments for '" + e.name + "'" }

// unknownCommandError is a command name missing from the table.
type unknownCommandError struct{ args [][]byte }

func (e *unknownCommandError) Error() string { return "unknown command" }

// unknownSubcommandError is a subcommand missing from its container.
type unknownSubcommandError struct {
	sub       []byte
	container string
}

func (e *unknownSubcommandError) Error() string { return "unknown subcommand" }

// textError carries its reply text verbatim (CONFIG and SCAN errors in
// Redis's words).
type textError struct{ text string }

func (e *textError) Error() string { return e.text }

// appendErrorText appends the reply text of err (without the leading '-').
// It is the only place where errors become RESP error replies, so every
// message stays in Redis's wording, the errors of other packages (shards,
// replication, engine) included: they carry plain texts.
func appendErrorText(b []byte, err error) []byte {
	var (
		remote *replication.RemoteError
		arity  *arityError
		unk    *unknownCommandError
		sub    *unknownSubcommandError
		text   *textError
		perr   *protocolError
		quorum *replication.QuorumError
		pend   *replication.PendingError
		gone   *replication.RemovedError
		redir  *redirectError
		node   *unknownNodeError
		slotE  *replication.SlotError
	)
	switch {
	case errors.As(err, &remote):
		// A reply from another node of the cluster, already in its
		// wording: relayed verbatim.
		return appendLine(b, remote.Msg)
	case errors.As(err, &redir):
		if redir.ask {
			b = append(b, "ASK "...)
		} else {
			b = append(b, "MOVED "...)
		}
		b = strconv.AppendInt(b, int64(redir.slot), 10)
		b = append(b, ' ')
		return appendLine(b, redir.addr)
	case errors.Is(err, errCrossSlot):
		return append(b, "CROSSSLOT Keys in request don't hash to the same slot"...)
	case errors.Is(err, errSlotNotServed):
		return append(b, "CLUSTERDOWN Hash slot not served"...)
	case errors.Is(err, replication.ErrTryAgain):
		return append(b, "TRYAGAIN Multiple keys request during rehashing of slot"...)
	case errors.Is(err, shards.ErrMoving):
		return append(b, "TRYAGAIN Key is being migrated, retry"...)
	case errors.Is(err, shards.ErrBusyKey):
		return append(b, "BUSYKEY Target key name already exists."...)
	case errors.As(err, &slotE):
		return appendLine(append(b, "ERR "...), slotE.Msg)
	case errors.As(err, &node):
		b = append(b, "ERR I don't know about node "...)
		return appendLine(b, clip([]byte(node.id)))
	case errors.Is(err, replication.ErrOwnGroup):
		return append(b, "ERR that node belongs to this group: CLUSTER MEET introduces another group"...)
	case errors.Is(err, replication.ErrOtherGroup):
		return append(b, "ERR that node belongs to another group (its --group differs from this node's); a group only joins nodes of its own name"...)
	case errors.As(err, &quorum):
		b = append(b, "ERR refusing to remove "...)
		b = appendLine(b, quorum.ID)
		b = append(b, ": "...)
		b = strconv.AppendInt(b, int64(quorum.Reachable), 10)
		b = append(b, " of the remaining "...)
		b = strconv.AppendInt(b, int64(quorum.Remaining), 10)
		b = append(b, " voters would be reachable, a majority needs "...)
		return strconv.AppendInt(b, int64(quorum.Needed), 10)
	case errors.Is(err, replication.ErrQuorumAtRisk):
		return append(b, "ERR refusing the change: the remaining voters would not include a reachable majority"...)
	case errors.As(err, &pend):
		b = append(b, "ERR "...)
		b = appendLine(b, pend.ID)
		b = append(b, " was added as a non-voter and will be promoted to voter once it catches up ("...)
		if pend.Reachable {
			b = strconv.AppendUint(b, pend.Lag, 10)
			b = append(b, " log entries behind"...)
		} else {
			b = append(b, "not reachable from the leader yet"...)
		}
		return append(b, "); RAFT.INFO on the leader shows its progress"...)
	case errors.Is(err, replication.ErrNotPromoted):
		return append(b, "ERR the node was added as a non-voter and will be promoted to voter once it catches up"...)
	case errors.As(err, &gone):
		b = append(b, "CLUSTERDOWN this node was removed from the cluster ("...)
		if gone.LeaderID != "" {
			b = append(b, "leader "...)
			b = appendLine(b, gone.LeaderID)
			if gone.LeaderRespAddr != "" {
				b = append(b, " at "...)
				b = appendLine(b, gone.LeaderRespAddr)
			}
		} else {
			b = append(b, "leader unknown"...)
		}
		return append(b, "); RAFT.JOIN it again to rejoin"...)
	case errors.Is(err, replication.ErrRemoved):
		return append(b, "CLUSTERDOWN this node was removed from the cluster; RAFT.JOIN it again to rejoin"...)
	case errors.Is(err, replication.ErrNoLeader):
		return append(b, "CLUSTERDOWN The cluster is down: no leader"...)
	case errors.Is(err, replication.ErrNotLeader):
		return append(b, "TRYAGAIN This node is not the leader"...)
	case errors.Is(err, replication.ErrLeadershipLost):
		return append(b, "TRYAGAIN Leadership changed while the command was in flight; it may or may not have been applied"...)
	case errors.Is(err, replication.ErrShutdown):
		return append(b, "CLUSTERDOWN This node is shutting down"...)
	case errors.Is(err, replication.ErrBadPayload):
		return append(b, "ERR invalid replication payload"...)
	case errors.Is(err, replication.ErrUnknownNode):
		return append(b, "ERR no such cluster member"...)
	case errors.Is(err, replication.ErrIDInUse):
		return append(b, "ERR a member with this id exists at another raft address; RAFT.REMOVE it first to replace it"...)
	case errors.As(err, &arity):
		b = append(b, "ERR wrong number of arguments for '"...)
		b = appendLine(b, arity.name)
		return append(b, "' command"...)
	case errors.As(err, &unk):
		b = append(b, "ERR unknown command '"...)
		if len(unk.args) > 0 {
			b = appendLine(b, clip(unk.args[0]))
		}
		b = append(b, "', with args beginning with: "...)
		for _, a := range unk.args[1:] {
			if len(b) > 256 {
				break
			}
			b = append(b, '\'')
			b = appendLine(b, clip(a))
			b = append(b, "' "...)
		}
		return b
	case errors.As(err, &sub):
		b = append(b, "ERR unknown subcommand '"...)
		b = appendLine(b, clip(sub.sub))
		b = append(b, "'. Try "...)
		b = appendUpper(b, sub.container)
		return append(b, " HELP."...)
	case errors.As(err, &text):
		return appendLine(b, text.text)
	case errors.As(err, &perr):
		return appendLine(append(b, "ERR "...), perr.Error())
	case errors.Is(err, engine.ErrNotInteger):
		return append(b, "ERR value is not an integer or out of range"...)
	case errors.Is(err, engine.ErrSyntax):
		return append(b, "ERR syntax error"...)
	case errors.Is(err, shards.ErrWrongType):
		return append(b, "WRONGTYPE Operation against a key holding the wrong kind of value"...)
	case errors.Is(err, ErrNoAuth):
		return append(b, "NOAUTH Authentication required."...)
	case errors.Is(err, ErrWrongPass):
		return append(b, "WRONGPASS invalid username-password pair or user is disabled."...)
	case errors.Is(err, ErrNoPasswordSet):
		return append(b, "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"...)
	case errors.Is(err, ErrHelloNoAuth):
		return append(b, "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"...)
	case errors.Is(err, ErrNoProto):
		return append(b, "NOPROTO unsupported protocol version"...)
	case errors.Is(err, ErrDBIndex):
		return append(b, "ERR DB index is out of range"...)
	case errors.Is(err, ErrMaxClients):
		return append(b, "ERR max number of clients reached"...)
	case errors.Is(err, ErrInvalidCursor):
		return append(b, "ERR invalid cursor"...)
	case errors.Is(err, ErrPersistenceOff):
		return append(b, "ERR persistence is off: SAVE, BGSAVE and SHUTDOWN SAVE are unavailable (in cluster mode Raft snapshots persist the keyspace)"...)
	case errors.Is(err, shards.ErrWouldGrow): // the noeviction policy's refusal
		return append(b, "OOM command not allowed when used memory > 'maxmemory'."...)
	case errors.Is(err, ErrShutdownFailed):
		return append(b, "ERR Errors trying to SHUTDOWN. Check logs."...)
	case errors.Is(err, ErrProtectedMode):
		return append(b, "DENIED cellserver is running in protected mode because protected mode is enabled and no password is set for the default user. "+
			"In this mode connections are only accepted from the loopback interface. "+
			"If you want to connect from external computers to cellserver you may adopt one of the following solutions: "+
			"1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to cellserver "+
			"from the same host the server is running, however MAKE SURE cellserver is not publicly accessible from internet if you do so. "+
			"2) Alternatively you can just disable the protected mode by editing the cellserver configuration file, and setting the protected mode option to 'no', "+
			"and then restarting the server. "+
			"3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. "+
			"4) Set up an authentication password for the default user (requirepass). "+
			"NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside."...)
	case errors.Is(err, errExecAbort):
		return append(b, "EXECABORT Transaction discarded because of previous errors."...)
	case errors.Is(err, errNestedMulti):
		return append(b, "ERR MULTI calls can not be nested"...)
	case errors.Is(err, errExecNoMulti):
		return append(b, "ERR EXEC without MULTI"...)
	case errors.Is(err, errDiscardNo):
		return append(b, "ERR DISCARD without MULTI"...)
	case errors.Is(err, errWatchInMulti):
		return append(b, "ERR WATCH inside MULTI is not allowed"...)
	case errors.Is(err, errWatch):
		return append(b, "ERR WATCH is not supported: a transaction's writes are applied as one atomic step; use CL.THROTTLEALL or one transaction instead of check-and-set"...)
	case errors.Is(err, errNoMulti):
		return append(b, "ERR Command not allowed inside a transaction"...)
	case errors.Is(err, errTxTooLarge):
		return append(b, "ERR transaction discarded: the queued commands exceed client-query-buffer-limit"...)
	case errors.Is(err, errTxReadBetween):
		return append(b, "ERR a transaction cannot read the keyspace between two writes (its writes are applied as one step): put reads before the first write or after the last"...)
	case errors.Is(err, replication.ErrGroupUnknown):
		return append(b, "ERR another group has not answered lately, so its slots are unknown: retry in a moment"...)
	case errors.Is(err, ErrAuthThrottled):
		return append(b, "ERR too many failed authentication attempts from this address; try again later"...)
	}
	// Engine range errors and anything else: "ERR " and the message, which
	// names the argument at fault.
	return appendLine(append(b, "ERR "...), err.Error())
}

// appendLine appends s with CR and LF replaced by spaces, so that no text
// can break the reply framing.
func appendLine[T string | []byte](b []byte, s T) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		b = append(b, c)
	}
	return b
}

// clip shortens an echoed argument as Redis does (128 bytes).
func clip(b []byte) []byte {
	if len(b) > 128 {
		return b[:128]
	}
	return b
}

func appendUpper(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		b = append(b, c)
	}
	return b
}
