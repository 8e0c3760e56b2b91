package resp

import "github.com/cellserver/cellserver/internal/hashslot"

// clusterSlots is the number of hash slots of the Redis Cluster protocol.
const clusterSlots = hashslot.Count

// keySlot returns key's hash slot, in [0, 16384).
func keySlot(key []byte) int { return hashslot.Of(key) }
