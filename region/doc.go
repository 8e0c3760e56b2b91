// Package region extends a cellserver deployment (a standalone server, a
// Raft group, or several groups as one Redis Cluster) across regions: each
// limiter key is decided by a policy, matched on its name, in one of the
// modes local (each region alone), split (each region enforces its share of
// the limit, with no traffic between regions), async (each region decides
// at once and ships what it consumed to the others, where it is applied
// exactly once) or global (one home region decides, the others forward to
// it and pay one round trip).
//
// The package holds no replicated state and runs no consensus of its own: a
// Gate is the region stage of the decision path (package decide): it sits
// in front of the deployment's decide.Backend (the standalone store or
// the replicated node), rewrites, forwards or ships limiter operations, and
// talks to peer regions through bounded RESP links (internal/respclient).
// What it applies for a peer goes through that Backend, and so is
// replicated like any write. See DESIGN.md.
package region
