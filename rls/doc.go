// Package rls serves Envoy's global rate-limit API,
// envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit, over
// cellserver's keyspace.
//
// Rules come from a directory of YAML files in envoyproxy/ratelimit's format
// (domain, nested descriptors, rate_limit with unit and requests_per_unit,
// unlimited, shadow_mode, quota_mode, name, replaces, value wildcards),
// extended with the limiter to run (`algorithm`: gcra, sliding-window or
// fixed-window) and GCRA's `burst`. A Service holds the loaded rules as an
// immutable snapshot swapped atomically on reload, and decides each request
// with one Write of limiter operations to the keyspace — the same operations
// CL.THROTTLE and CL.THROTTLEALL submit — so a cluster replicates the
// decisions exactly as it replicates those commands. In a cluster of
// several groups a Router decides each descriptor in the group that serves
// its key, whichever node is asked. See DESIGN.md.
package rls
