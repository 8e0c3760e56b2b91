// Command cellserver is a rate-limiting server that speaks the Redis
// protocol: a drop-in replacement for the redis-cell module plus token
// bucket, leaky bucket, fixed window, sliding window and sliding log limiters.
//
//	cellserver [config-file] [--port 6379] [--bind 127.0.0.1] [--requirepass-file path] ...
//
// Besides serving, it prints its docs (--gen-docs, --gen-config-docs,
// --gen-sample-config) and joins groups into one Redis Cluster
// (--assign-slots HOST:PORT,..., the Helm chart's slot Job; assignslots.go).
package main
