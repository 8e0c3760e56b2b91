package resp

import (
	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/region"
	"github.com/cellserver/cellserver/shards"
)

// A command is data plus code. Its metadata (name, arity, flags, key
// positions, documentation) is kept in resp/commands/<name>.json and
// generated into commands_gen.go; its code is bound here, by name. The
// table refuses a command without code, and a test fails when a binding
// names no command.

// binding is the code of one command or subcommand: Handler, or the batch
// writer's Prepare and Finish (see Command), and what routing and
// transactions ask of some commands.
type binding struct {
	Handler     func(c *Conn, args [][]byte) error
	Prepare     func(c *Conn, args [][]byte, op *shards.Op) error
	Finish      func(c *Conn, args [][]byte, res *shards.Result)
	MovableKeys func(dst, args [][]byte) [][]byte
	slotChange  func(args [][]byte) (cluster.SlotChange, error)
}

// Command sets, the "register" of a command's JSON file: every server has
// the built-in ones; RegisterCluster and RegisterRegions add theirs.
const (
	registerBuiltin = ""
	registerRaft    = "raft"
	registerRegion  = "region"
)

// bindings maps each command's full name ("client|setname") to its code.
func bindings() map[string]binding {
	return map[string]binding{
		"acl|log":                 {Handler: aclLogHandler},
		"acl|whoami":              {Handler: aclWhoamiHandler},
		"asking":                  {Handler: askingHandler},
		"auth":                    {Handler: authHandler},
		"bgsave":                  {Handler: bgsaveHandler},
		"cl.inspect":              {Handler: inspectHandler},
		"cc.acquire":              {Prepare: prepareLease(engine.LeaseAcquire), Finish: finishAcquire},
		"cc.release":              {Prepare: prepareLease(engine.LeaseRelease), Finish: finishLeaseCount},
		"cc.renew":                {Prepare: prepareLease(engine.LeaseRenew), Finish: finishLeaseCount},
		"cl.throttle":             {Prepare: prepareLimit(engine.KindGCRA), Finish: finishThrottle},
		"cl.throttleall":          {Prepare: prepareThrottleAll, Finish: finishThrottleAll, MovableKeys: throttleAllKeys},
		"client|getname":          {Handler: clientGetnameHandler},
		"client|id":               {Handler: clientIDHandler},
		"client|info":             {Handler: clientInfoHandler},
		"client|kill":             {Handler: clientKillHandler},
		"client|list":             {Handler: clientListHandler},
		"client|no-evict":         {Handler: clientNoEvictHandler},
		"client|setinfo":          {Handler: clientSetinfoHandler},
		"client|setname":          {Handler: clientSetnameHandler},
		"cluster|abortmove":       {Handler: clusterHandler(clusterAbortmoveCmd)},
		"cluster|addslots":        slotsBinding(cluster.SlotAdd, false),
		"cluster|addslotsrange":   slotsBinding(cluster.SlotAdd, true),
		"cluster|bumpepoch":       {Handler: clusterView(clusterBumpepochView)},
		"cluster|countkeysinslot": {Handler: clusterHandler(clusterCountkeysinslotCmd)},
		"cluster|delslots":        slotsBinding(cluster.SlotDel, false),
		"cluster|delslotsrange":   slotsBinding(cluster.SlotDel, true),
		"cluster|failover":        {Handler: clusterHandler(clusterFailoverCmd)},
		"cluster|getkeysinslot":   {Handler: clusterHandler(clusterGetkeysinslotCmd)},
		"cluster|info":            {Handler: clusterView(clusterInfoView)},
		"cluster|keyslot":         {Handler: clusterHandler(clusterKeyslotCmd)},
		"cluster|meet":            {Handler: clusterHandler(clusterMeetCmd)},
		"cluster|myid":            {Handler: clusterView(clusterMyidView)},
		"cluster|nodes":           {Handler: clusterView(clusterNodesView)},
		"cluster|replicas":        {Handler: clusterHandler(clusterReplicasCmd)},
		"cluster|setslot":         {Handler: clusterHandler(clusterSetslotCmd), slotChange: parseSetSlot},
		"cluster|shards":          {Handler: clusterView((*cluster.Routing).ShardsReply)},
		"cluster|slaves":          {Handler: clusterHandler(clusterReplicasCmd)},
		"cluster|slots":           {Handler: clusterView((*cluster.Routing).SlotsReply)},
		"command":                 {Handler: commandHandler},
		"command|count":           {Handler: commandCountHandler},
		"command|docs":            {Handler: commandDocsHandler},
		"command|info":            {Handler: commandInfoHandler},
		"command|list":            {Handler: commandListHandler},
		"config|get":              {Handler: configGetHandler},
		"config|resetstat":        {Handler: configResetstatHandler},
		"config|rewrite":          {Handler: configRewriteHandler},
		"config|set":              {Handler: configSetHandler},
		"dbsize":                  {Handler: dbsizeHandler},
		"del":                     {Prepare: delPrepare, Finish: delFinish},
		"discard":                 {Handler: discardHandler},
		"dump":                    {Handler: dumpHandler},
		"echo":                    {Handler: echoHandler},
		"exec":                    {Handler: execHandler},
		"exists":                  {Handler: existsHandler},
		"flushall":                {Prepare: flushPrepare, Finish: flushFinish},
		"flushdb":                 {Prepare: flushPrepare, Finish: flushFinish},
		"fw.incr":                 {Prepare: prepareLimit(engine.KindFixedWindow), Finish: finishMillis},
		"get":                     {Handler: getHandler},
		"hello":                   {Handler: helloHandler},
		"info":                    {Handler: infoHandler},
		"keys":                    {Handler: keysHandler},
		"lastsave":                {Handler: lastsaveHandler},
		"lb.add":                  {Prepare: prepareLimit(engine.KindLeakyBucket), Finish: finishLeaky},
		"limiter|top":             {Handler: limiterTop},
		"memory|usage":            {Handler: memoryUsageHandler},
		"migrate":                 {Handler: migrateHandler, MovableKeys: migrateKeys},
		"multi":                   {Handler: multiHandler},
		"object|freq":             {Handler: objectFreq},
		"ping":                    {Handler: pingHandler},
		"pttl":                    {Handler: ttlHandler(true)},
		"quit":                    {Handler: quitHandler},
		"raft.hello":              {Handler: raftHelloHandler},
		"raft.info":               {Handler: raftInfoHandler},
		"raft.join":               {Handler: raftJoinHandler},
		"raft.remove":             {Handler: raftRemoveHandler},
		"readonly":                {Handler: readonlyHandler},
		"readwrite":               {Handler: readonlyHandler},
		"region.apply":            {Handler: gateHandler(regionApplyHandler)},
		"region.exec":             {Handler: gateHandler(regionExecHandler), MovableKeys: region.ExecKeys},
		"region|status":           {Handler: gateHandler(regionStatusHandler)},
		"restore":                 {Prepare: restorePrepare, Finish: restoreFinish},
		"role":                    {Handler: roleHandler},
		"save":                    {Handler: saveHandler},
		"scan":                    {Handler: scanHandler},
		"select":                  {Handler: selectHandler},
		"shutdown":                {Handler: shutdownHandler},
		"sl.add":                  {Prepare: prepareLimit(engine.KindSlidingLog), Finish: finishMillis},
		"slowlog|get":             {Handler: slowlogGetHandler},
		"slowlog|len":             {Handler: slowlogLenHandler},
		"slowlog|reset":           {Handler: slowlogResetHandler},
		"sw.incr":                 {Prepare: prepareLimit(engine.KindSlidingWindow), Finish: finishMillis},
		"tb.take":                 {Prepare: prepareLimit(engine.KindTokenBucket), Finish: finishMillis},
		"time":                    {Handler: timeHandler},
		"ttl":                     {Handler: ttlHandler(false)},
		"type":                    {Handler: typeHandler},
		"unwatch":                 {Handler: unwatchHandler},
		"watch":                   {Handler: watchHandler},
	}
}

// commands returns a fresh copy of the commands of one set, bound to their
// code (the table annotates its entries, so each server gets its own).
func commands(register string) []*Command {
	b := bindings()
	var out []*Command
	for _, cmd := range commandMeta() {
		if cmd.Register != register {
			continue
		}
		bind(cmd, cmd.Name, b)
		for _, sub := range cmd.Subcommands {
			bind(sub, cmd.Name+"|"+sub.Name, b)
		}
		out = append(out, cmd)
	}
	return out
}

func bind(cmd *Command, full string, b map[string]binding) {
	h := b[full]
	cmd.Handler, cmd.Prepare, cmd.Finish = h.Handler, h.Prepare, h.Finish
	cmd.MovableKeys, cmd.slotChange = h.MovableKeys, h.slotChange
}

// okOr answers OK when err is nil, and returns err (which the dispatcher
// answers otherwise): the tail of a handler whose last step may fail.
func okOr(c *Conn, err error) error {
	if err == nil {
		c.WriteOK()
	}
	return err
}
