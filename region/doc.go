// Package region extends a cellserver deployment (a standalone server, a
// Raft group, or several groups as one Redis Cluster) across regions: each
// limiter key is decided by a policy, matched on its name, in one of the
// modes local (each region alone), split (each region enforces its share of
// the limit, with no traffic between regions) or global (one home region
// decides, the others forward to it and pay one round trip).
//
// The package holds no replicated state and runs no consensus of its own: a
// Gate sits in front of the deployment's Backend (the standalone store or the
// replicated node), rewrites or forwards limiter operations, and talks to
// peer regions through bounded RESP links (internal/respclient). See
// DESIGN.md.
package region
