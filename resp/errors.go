package resp

import (
	"errors"
	"reflect"
	"strconv"
	"strings"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/clientlist"
	"github.com/cellserver/cellserver/internal/setting"
	"github.com/cellserver/cellserver/internal/txqueue"
	"github.com/cellserver/cellserver/region"
	"github.com/cellserver/cellserver/replication"
	"github.com/cellserver/cellserver/shards"
	"github.com/cellserver/cellserver/snapshot"
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
	// the server runs without standalone persistence: in memory only
	// (save "") or in cluster mode.
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

// Refusals of resp's own commands (the server, connection, key and
// transaction commands', and CLUSTER's on a standalone server), each
// carrying its reply text.
var (
	errProtoVersion    = &textError{"ERR Protocol version is not an integer or out of range"}
	errClientName      = &textError{"ERR Client names cannot contain spaces, newlines or special characters."}
	errNoSuchClient    = &textError{"ERR No such client"}
	errNegative        = &textError{"ERR value is out of range, must be positive"}
	errHotkeysOff      = &textError{"ERR hotkeys-capacity is 0: access frequency not tracked"}
	errNoConfigFile    = &textError{"ERR The server is running without a config file"}
	errSlowlogCount    = &textError{"ERR count should be greater than or equal to -1"}
	errNoShutdown      = &textError{"ERR No shutdown in progress."}
	errClusterDisabled = &textError{"ERR This instance has cluster support disabled"}
	errExecAbort       = &textError{"EXECABORT Transaction discarded because of previous errors."}
	errNestedMulti     = &textError{"ERR MULTI calls can not be nested"}
	errExecNoMulti     = &textError{"ERR EXEC without MULTI"}
	errDiscardNo       = &textError{"ERR DISCARD without MULTI"}
	errWatchInMulti    = &textError{"ERR WATCH inside MULTI is not allowed"}
	errWatch           = &textError{"ERR WATCH is not supported: a transaction's writes are applied as one atomic step; use CL.THROTTLEALL or one transaction instead of check-and-set"}
	errNoMulti         = &textError{"ERR Command not allowed inside a transaction"}
)

// refusalKind names what a refusal refuses.
type refusalKind uint8

const (
	refuseHelloOption   refusalKind = iota // HELLO's unknown option
	refuseClientOption                     // CLIENT SETINFO's unknown attribute
	refuseClientInfo                       // CLIENT SETINFO's value with spaces
	refuseTypeName                         // SCAN TYPE's unknown type
	refuseConfigRewrite                    // CONFIG REWRITE's failure, arg its cause
)

// refusal refuses a command for one argument, arg (already clipped),
// which its reply quotes, worded by argRefusals[kind].
func refusal(kind refusalKind, arg string) error {
	w := argRefusals[kind]
	return &textError{w.before + arg + w.after}
}

// argRefusals word a refusal by its kind: arg goes between before and
// after (CLIENT SETINFO's attribute in lower case).
var argRefusals = [...]struct{ before, after string }{
	refuseHelloOption:   {"ERR Syntax error in HELLO option '", "'"},
	refuseClientOption:  {"ERR Unrecognized option '", "'"},
	refuseClientInfo:    {"ERR ", " cannot contain spaces, newlines or special characters."},
	refuseTypeName:      {"ERR unknown type name '", "'"},
	refuseConfigRewrite: {"ERR Rewriting config file: ", ""},
}

// arityError is a command called with the wrong number of arguments.
type arityError struct{ name string }

func (e *arityError) Error() string { return "wrong number of arguments for '" + e.name + "'" }

// unknownCommandError is a command name missing from the table.
type unknownCommandError struct{ args [][]byte }

func (e *unknownCommandError) Error() string { return "unknown command" }

// unknownSubcommand refuses sub, which container does not have.
func unknownSubcommand(sub []byte, container string) error {
	return &textError{"ERR unknown subcommand '" + string(clip(sub)) + "'. Try " + strings.ToUpper(container) + " HELP."}
}

// textError carries its reply text verbatim, in Redis's words.
type textError struct{ text string }

func (e *textError) Error() string { return e.text }

// sentinelReplies are the reply texts of sentinel errors, this package's
// and those of the packages below it, in the order they are tested with
// errors.Is (the first match words the reply). An error wrapping none of
// them and of no type appendErrorText knows is "ERR " and its own text.
var sentinelReplies = []struct {
	err  error
	text string
}{
	{cluster.ErrCrossSlot, "CROSSSLOT Keys in request don't hash to the same slot"},
	{cluster.ErrSlotNotServed, "CLUSTERDOWN Hash slot not served"},
	{cluster.ErrSlotNotKnown, "CLUSTERDOWN Hash slot not served yet: a group of the cluster has not answered this node (just after CLUSTER MEET or a restart); retry in a moment"},
	{cluster.ErrTryAgain, "TRYAGAIN Multiple keys request during rehashing of slot"},
	{cluster.ErrTargetUnreachable, "IOERR error or timeout connecting to the client"},
	{shards.ErrMoving, "TRYAGAIN Key is being migrated, retry"},
	{shards.ErrBusyKey, "BUSYKEY Target key name already exists."},
	{replication.ErrOwnGroup, "ERR that node belongs to this group: CLUSTER MEET introduces another group"},
	{replication.ErrOtherGroup, "ERR that node belongs to another group (its --group differs from this node's); a group only joins nodes of its own name"},
	{replication.ErrQuorumAtRisk, "ERR refusing the change: the remaining voters would not include a reachable majority"},
	{replication.ErrAlreadyLeader, "ERR You should send CLUSTER FAILOVER to a replica"},
	{replication.ErrNotVoter, "ERR this node is not a voter yet: it can lead once the leader has promoted it (RAFT.INFO shows voter=1)"},
	{replication.ErrNotPromoted, "ERR the node was added as a non-voter and will be promoted to voter once it catches up"},
	{replication.ErrRemoved, "CLUSTERDOWN this node was removed from the cluster; RAFT.JOIN it again to rejoin"},
	{replication.ErrNoLeader, "CLUSTERDOWN The cluster is down: no leader"},
	{replication.ErrNotLeader, "TRYAGAIN This node is not the leader"},
	{replication.ErrLeadershipLost, "TRYAGAIN Leadership changed while the command was in flight; it may or may not have been applied"},
	{replication.ErrShutdown, "CLUSTERDOWN This node is shutting down"},
	{replication.ErrBadPayload, "ERR invalid replication payload"},
	{replication.ErrUnknownNode, "ERR no such cluster member"},
	{replication.ErrNotGroupLog, "ERR that node does not hold this group's raft log (RAFT.INFO's raft_group_id differs, or it has none); wipe its data directory and RAFT.JOIN it again"},
	{replication.ErrIDInUse, "ERR a member with this id exists at another raft address, and the leader could not confirm that the node at the new one is that member (its log says why); RAFT.REMOVE it first to replace it"},
	{cluster.ErrGroupUnknown, "ERR another group has not answered lately, so its slots are unknown: retry in a moment"},
	{engine.ErrNotInteger, "ERR value is not an integer or out of range"},
	{engine.ErrSyntax, "ERR syntax error"},
	{engine.ErrLeaseID, "ERR lease id must be 1 to 64 bytes"},
	{shards.ErrWrongType, "WRONGTYPE Operation against a key holding the wrong kind of value"},
	{shards.ErrWouldGrow, "OOM command not allowed when used memory > 'maxmemory'."}, // the noeviction policy's refusal
	{ErrNoAuth, "NOAUTH Authentication required."},
	{ErrWrongPass, "WRONGPASS invalid username-password pair or user is disabled."},
	{ErrNoPasswordSet, "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"},
	{ErrHelloNoAuth, "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"},
	{ErrNoProto, "NOPROTO unsupported protocol version"},
	{ErrDBIndex, "ERR DB index is out of range"},
	{ErrMaxClients, "ERR max number of clients reached"},
	{ErrInvalidCursor, "ERR invalid cursor"},
	{ErrPersistenceOff, "ERR persistence is off: SAVE, BGSAVE and SHUTDOWN SAVE are unavailable (the server runs in memory only, save \"\"; or in cluster mode, where Raft snapshots persist the keyspace)"},
	{ErrShutdownFailed, "ERR Errors trying to SHUTDOWN. Check logs."},
	{ErrProtectedMode, "DENIED cellserver is running in protected mode because protected mode is enabled and no password is set for the default user. " +
		"In this mode connections are only accepted from the loopback interface. " +
		"If you want to connect from external computers to cellserver you may adopt one of the following solutions: " +
		"1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to cellserver " +
		"from the same host the server is running, however MAKE SURE cellserver is not publicly accessible from internet if you do so. " +
		"2) Alternatively you can just disable the protected mode by editing the cellserver configuration file, and setting the protected mode option to 'no', " +
		"and then restarting the server. " +
		"3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. " +
		"4) Set up an authentication password for the default user (requirepass). " +
		"NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside."},
	{ErrAuthThrottled, "ERR too many failed authentication attempts from this address; try again later"},
	{errWaitInMulti, "ERR WAIT is not allowed inside MULTI: a transaction is answered at once, as one step"},
	{errTooManyWaiting, "ERR too many requests are waiting on this server (max-waiting): retry later, or without WAIT"},
	{txqueue.ErrReadBetween, "ERR a transaction cannot read the keyspace between two writes (its writes are applied as one step): put reads before the first write or after the last"},
	{cluster.ErrFailoverOption, "ERR FORCE and TAKEOVER are not needed: a group whose leader is down elects a new one by itself"},
	{cluster.ErrInvalidSlot, "ERR Invalid slot"},
	{cluster.ErrInvalidSlotOrCount, "ERR Invalid slot or number of keys"},
	{cluster.ErrBadSlot, "ERR Invalid or out of range slot"},
	{cluster.ErrSetSlotSyntax, "ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP"},
	{cluster.ErrNotMaster, "ERR The specified node is not a master"},
	{cluster.ErrTargetWrite, "IOERR error or timeout writing to target instance"},
	{cluster.ErrTargetRead, "IOERR error or timeout reading to target instance"},
	{cluster.ErrMigrateKeysArg, "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string"},
	{snapshot.ErrDumpNotCellserver, "ERR DUMP payload is not a cellserver payload (Redis RDB payloads cannot be restored into cellserver)"},
	{snapshot.ErrDumpVersion, "ERR DUMP payload version or checksum are wrong"},
	{snapshot.ErrDumpChecksum, "ERR DUMP payload version or checksum are wrong"},
	{cluster.ErrRestoreTTL, "ERR Invalid TTL value, must be >= 0"},
	{cluster.ErrRestoreFreq, "ERR Invalid FREQ value, must be >= 0 and <= 255"},
	{cluster.ErrRestoreIdle, "ERR Invalid IDLETIME value, must be >= 0"},

	{clientlist.ErrKillID, "ERR client-id should be greater than 0"},
	{clientlist.ErrListID, "ERR Invalid client ID"},
}

// unknownNode returns err, made the refusal naming id when it is
// cluster.ErrUnknownNode (Redis's reply names the id).
func unknownNode(err error, id string) error {
	if errors.Is(err, cluster.ErrUnknownNode) {
		return &textError{"ERR I don't know about node " + string(clip([]byte(id)))}
	}
	return err
}

// slotRefusals word a *cluster.SlotError by the sentinel it wraps, in
// Redis's words: the slot's number goes between before and after.
var slotRefusals = []struct {
	err           error
	before, after string
}{
	{cluster.ErrSlotBusy, "ERR Slot ", " is already busy"},
	{cluster.ErrSlotUnassigned, "ERR Slot ", " is already unassigned"},
	{cluster.ErrSlotNotOwned, "ERR I'm not the owner of hash slot ", ""},
	{cluster.ErrSlotOwned, "ERR I'm already the owner of hash slot ", ""},
	{cluster.ErrSlotHasKeys, "ERR Can't assign hashslot ", " to a different node while I still hold keys for this hash slot."},
}

// appendErrorText appends the reply text of err (without the leading '-').
// It is the only place where errors become RESP error replies, so every
// message stays in Redis's wording, the errors of other packages (shards,
// replication, engine) included: they carry plain texts. Errors with
// fields are worded here, first (a typed error may wrap a sentinel whose
// generic text it refines); sentinels by sentinelReplies.
func appendErrorText(b []byte, err error) []byte {
	if re := (*region.RemoteError)(nil); errors.As(err, &re) {
		// A peer region's reply to a forwarded command, already in its
		// wording: relayed verbatim.
		return appendLine(b, re.Msg)
	}
	if b, ok := appendSettingError(b, err); ok {
		return b // first: a refused value wraps the setter's own error
	}
	if gap := (*region.SequenceError)(nil); errors.As(err, &gap) {
		// The sender reads the code and the number after it.
		return appendParts(b, region.OutOfSequenceCode+" ", gap.Expected, " batch ", gap.Seq,
			" is out of sequence: its lane expects batch ", gap.Expected, " (nothing applied; send the lane's batches again from there)")
	}
	var (
		remote *replication.RemoteError
		peer   *replication.PeerError
		arity  *arityError
		unk    *unknownCommandError
		text   *textError
		perr   *protocolError
		quorum *replication.QuorumError
		pend   *replication.PendingError
		gone   *replication.RemovedError
		logE   *replication.LogError
		redir  *cluster.RedirectError
		slotE  *cluster.SlotError
		busy   *cluster.MoveBusyError
		abortB *cluster.AbortBlockedError
		inFl   *cluster.InFlightError
		resend *cluster.ResendError
		txMax  *txqueue.LimitError
		txOut  *txqueue.ReplyError
		argE   *engine.ArgError
		target *cluster.TargetReplyError
		repeat *cluster.SlotRepeatError
		order  *cluster.SlotOrderError
		port   *cluster.PortError
		nodeID *cluster.NodeIDError
		cType  *clientlist.TypeError
	)
	switch {
	case errors.As(err, &inFl):
		// MIGRATE's failure (worded as such) with keys left in flight:
		// first, as it wraps that failure.
		return appendParts(appendErrorText(b, inFl.Err), "; ", inFl.Keys, " key(s) are in flight: they answer TRYAGAIN until a MIGRATE naming them again completes the move, or CLUSTER ABORTMOVE puts them back")
	case errors.As(err, &resend):
		return appendParts(b, "ERR key ", clip(resend.Key), " is in flight to ", resend.Dest, ", a member of group ", resend.Group,
			": MIGRATE it to a member of that group, or CLUSTER ABORTMOVE its slot")
	case errors.As(err, &remote):
		// A reply from another node of the cluster, already in its
		// wording: relayed verbatim.
		return appendLine(b, remote.Msg)
	case errors.As(err, &peer):
		// Another node's error that is no sentinel: its plain text.
		return appendLine(append(b, "ERR "...), peer.Text)
	case errors.As(err, &redir):
		if redir.Ask {
			b = append(b, "ASK "...)
		} else {
			b = append(b, "MOVED "...)
		}
		b = strconv.AppendInt(b, int64(redir.Slot), 10)
		b = append(b, ' ')
		return appendLine(b, redir.Addr)
	case errors.As(err, &slotE):
		for _, r := range slotRefusals {
			if slotE.Err == r.err {
				return appendParts(b, r.before, slotE.Slot, r.after)
			}
		}
		return appendLine(append(b, "ERR "...), slotE.Error())
	case errors.As(err, &abortB):
		// CLUSTER ABORTMOVE's refusal (cluster.PlanAbort).
		b = appendParts(b, "ERR ", abortB.Keys, " key(s) of slot ", abortB.Slot, " are in flight to ")
		if abortB.Dest == "" {
			b = append(b, "an unknown destination"...)
		} else {
			b = appendParts(b, abortB.Dest, ", a member of group ", abortB.Group)
		}
		return appendParts(b, ", which may hold them: MIGRATE them there again, or CLUSTER ABORTMOVE ", abortB.Slot,
			" FORCE once sure it does not have them")
	case errors.As(err, &quorum):
		return appendParts(b, "ERR refusing to remove ", quorum.ID, ": ", quorum.Reachable, " of the remaining ", quorum.Remaining,
			" voters would be reachable, a majority needs ", quorum.Needed)
	case errors.As(err, &pend):
		b = appendParts(b, "ERR ", pend.ID, " was added as a non-voter and will be promoted to voter once it catches up (")
		if pend.Reachable {
			b = appendParts(b, pend.Lag, " log entries behind")
		} else {
			b = append(b, "not reachable from the leader yet"...)
		}
		return append(b, "); RAFT.INFO on the leader shows its progress"...)
	case errors.As(err, &gone):
		b = append(b, "CLUSTERDOWN this node was removed from the cluster ("...)
		if gone.LeaderID != "" {
			b = appendParts(b, "leader ", gone.LeaderID)
			if gone.LeaderRespAddr != "" {
				b = appendParts(b, " at ", gone.LeaderRespAddr)
			}
		} else {
			b = append(b, "leader unknown"...)
		}
		return append(b, "); RAFT.JOIN it again to rejoin"...)
	case errors.As(err, &txMax):
		return appendParts(b, "ERR transaction discarded: more than ", txMax.Limit, " ", txMax.Unit, " queued (", txMax.Setting,
			"); split it into smaller transactions or raise the setting")
	case errors.As(err, &txOut):
		return appendParts(b, "ERR transaction discarded: its reply would be about ", txOut.Estimate,
			" bytes, over client-output-buffer-limit's hard limit of ", txOut.Hard, " bytes; nothing was run: split it into smaller transactions")
	case errors.As(err, &logE):
		return appendLogError(b, logE)
	case errors.As(err, &busy):
		return appendParts(b, "TRYAGAIN another MIGRATE or CLUSTER ABORTMOVE of this group is running (", busy.Holder, "): retry once it is done")
	case errors.As(err, &arity):
		return appendParts(b, "ERR wrong number of arguments for '", arity.name, "' command")
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
			b = appendParts(b, "'", clip(a), "' ")
		}
		return b
	case errors.As(err, &target):
		return appendLine(append(b, "ERR Target instance replied with error: "...), target.Msg)
	case errors.As(err, &repeat):
		return appendParts(b, "ERR Slot ", repeat.Slot, " specified multiple times")
	case errors.As(err, &order):
		return appendParts(b, "ERR start slot number ", order.First, " is greater than end slot number ", order.Last)
	case errors.As(err, &port):
		if port.Bus {
			b = append(b, "ERR Invalid bus port specified: "...)
		} else {
			b = append(b, "ERR Invalid base port specified: "...)
		}
		return appendLine(b, clip([]byte(port.Value)))
	case errors.As(err, &nodeID):
		return appendLine(append(b, "ERR Unknown node "...), nodeID.ID)
	case errors.As(err, &cType):
		return appendParts(b, "ERR Unknown client type '", clip([]byte(cType.Given)), "'")
	case errors.As(err, &text):
		return appendLine(b, text.text)
	case errors.As(err, &argE):
		// What wraps it ("limit 2: ", "limit-override 'x': ") stays in
		// front.
		b = appendLine(append(b, "ERR "...), strings.TrimSuffix(err.Error(), argE.Error()))
		return appendArgError(b, argE)
	case errors.As(err, &perr):
		return appendLine(append(b, "ERR "...), perr.Error())
	}
	for _, r := range sentinelReplies {
		if errors.Is(err, r.err) {
			return append(b, r.text...)
		}
	}
	// Engine range errors and anything else: "ERR " and the message, which
	// names the argument at fault.
	return appendLine(append(b, "ERR "...), err.Error())
}

// appendSettingError words CONFIG SET's refusals (internal/setting's
// Registry.Set) in Redis 7's words; ok is false for any other error.
func appendSettingError(b []byte, err error) (_ []byte, ok bool) {
	var (
		unknown *setting.UnknownError
		refused *setting.SetError
	)
	switch {
	case errors.As(err, &unknown):
		return appendParts(b, "ERR Unknown option or number of arguments for CONFIG SET - '", clip([]byte(unknown.Given)), "'"), true
	case errors.As(err, &refused):
		return appendParts(b, "ERR CONFIG SET failed (possibly related to argument '", clip([]byte(refused.Name)), "') - ", refused.Err.Error()), true
	}
	return b, false
}

// appendLogError words a refused join of a node whose raft log is not the
// group's (replication.LogError): what its log is, and what to do.
func appendLogError(b []byte, e *replication.LogError) []byte {
	b = appendParts(b, "ERR refusing ", e.ID, " at ", e.Addr)
	switch e.Reason {
	case replication.LogOtherGroup:
		b = appendParts(b, ": that node has the raft log of another group (its raft_group_id is ", e.NodeGroupID)
		if e.GroupID != "" {
			b = appendParts(b, ", this group's is ", e.GroupID)
		} else {
			b = append(b, ", this group has recorded none yet"...)
		}
		b = append(b, "): it bootstrapped a log of its own or belongs to another group"...)
	case replication.LogOwn:
		b = append(b, ": that node bootstrapped a raft log of its own, which records no group id yet ("...)
		if e.GroupID != "" {
			b = appendParts(b, "this group's raft_group_id is ", e.GroupID)
		} else {
			b = append(b, "this group has recorded none yet"...)
		}
		b = append(b, "): it is another group's log"...)
	case replication.LogNoGroupID:
		b = appendParts(b, ": that node's raft log has no group id past index ", e.Index,
			", where this group's log records raft_group_id ", e.GroupID)
		b = append(b, ": it is not this group's log, or a version before group ids snapshotted it"...)
	default:
		b = append(b, ": that node has no raft state (a new or wiped node), and a member's vote needs the group's log"...)
	}
	if e.Member {
		where := " from its own data directory (it rejoins at any address)"
		if e.Reason == replication.LogNoGroupID {
			where = " at the raft address the group lists for it (it catches up there)"
		}
		return appendParts(b, ". Start member ", e.ID, where, ", or RAFT.REMOVE ", e.ID,
			" first, wipe that node's data directory and RAFT.JOIN it as a new member")
	}
	return append(b, ". Wipe that node's data directory and RAFT.JOIN it again"...)
}

// appendArgError words a limiter argument's refusal: its name, its value
// as given and the range it must be in, in the argument's unit, with what
// narrows that range when another argument does.
func appendArgError(b []byte, e *engine.ArgError) []byte {
	b = appendParts(b, e.Arg, " ")
	if errors.Is(e.Err, engine.ErrInvalidDuration) {
		b = strconv.AppendQuote(b, string(clip([]byte(e.Value)))) // shows a stray space
		return appendArgRange(append(b, " is not a duration: expected an integer number of seconds, or an integer with a unit ms, s, m, h or d, from "...), e)
	}
	b = appendArgRange(appendParts(b, clip([]byte(e.Value)), " is out of range: must be "), e)
	switch e.Bound {
	case engine.BoundPerNanosecond:
		b = append(b, " for this period (period / count_per_period must be at least 1 ns)"...)
	case engine.BoundSpan:
		b = append(b, " with these rate and period (the time to refill or drain completely must stay under 2^62 ns, about 146 years)"...)
	case engine.BoundLogLimit:
		b = append(b, " (sl-max-limit)"...)
	}
	return b
}

// appendArgRange writes e's range: "1..1099511627776", "1..316224000
// seconds", "1ms..3660d".
func appendArgRange(b []byte, e *engine.ArgError) []byte {
	b = appendParts(b, engine.FormatValue(e.Min, e.Unit), "..", engine.FormatValue(e.Max, e.Unit))
	if e.Unit == engine.UnitSeconds {
		b = append(b, " seconds"...)
	}
	return b
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

// appendParts appends parts in turn: a string or []byte as appendLine
// does, an integer in decimal. Any other type is a programming error.
func appendParts(b []byte, parts ...any) []byte {
	for _, p := range parts {
		switch v := p.(type) {
		case string:
			b = appendLine(b, v)
		case []byte:
			b = appendLine(b, v)
		case int:
			b = strconv.AppendInt(b, int64(v), 10)
		case int64:
			b = strconv.AppendInt(b, v, 10)
		case uint64:
			b = strconv.AppendUint(b, v, 10)
		default:
			panic("resp: appendParts of a " + reflect.TypeOf(p).String())
		}
	}
	return b
}
