package decide

// Path is the decision path as cmd/cellserver assembles it, once, and
// hands to every front door: RESP's commands and MULTI/EXEC (Rules at
// parse time, then Backend), the Envoy service (Backend, and Groups in a
// cluster) and the receiving side of region links (REGION.EXEC: the
// home's Rules, then the gate's Exec into the Backend below it).
type Path struct {
	// Rules is the first stage: limit-override and limit-shadow.
	Rules Rules
	// Backend is everything below the rules: the region gate when a
	// region is configured, in front of the group's replication.Node or,
	// standalone, Local.
	Backend Backend
	// Groups routes by key across a cluster's groups, through the region
	// stage; nil standalone.
	Groups *Groups
}
