package cluster

// The Mover's questions about other groups, answered from the routing
// model (the directory's last answers) instead of each caller dialing the
// groups and reading CLUSTER NODES text.

// MayTakeSlot reports whether group g, as this node's routing table shows
// it, may hold or take a key of slot from a RESTORE arriving now: it owns
// the slot, any known group's view shows the slot importing (a group
// importing it takes a RESTORE sent after ASKING), its view is stale (not
// Reachable: what it does now is unknown), or it has no member to ask.
// False means the routing model rules the group out; whether it still
// holds keys of the slot restored earlier is a count only its members know
// (CLUSTER COUNTKEYSINSLOT). g out of range counts as may.
func (r *Routing) MayTakeSlot(g, slot int) bool {
	if g < 0 || g >= len(r.Groups) || slot < 0 || slot >= len(r.owner) {
		return true
	}
	gv := &r.Groups[g]
	if r.Owner(slot) == g || !gv.Reachable || len(gv.Members) == 0 {
		return true
	}
	for i := range r.Groups {
		if _, ok := r.Groups[i].Importing[slot]; ok {
			return true
		}
	}
	return r.ImportingFrom(slot) >= 0
}
