package replication

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
)

// Recovery from a lost majority, as Consul does it: the operator stops every
// surviving node, writes the same peers.json (the servers that remain) into
// each one's raft directory and starts them. At start-up, before raft runs,
// the node replaces its raft configuration with the file's
// (raft.RecoverCluster: it applies its log to the FSM, takes a snapshot
// carrying the new configuration and compacts the log), then renames the
// file so that it is never applied twice.

const (
	// PeersFile is the name, inside Config.Dir, of the recovery file: a
	// JSON list of {"id": ..., "address": ..., "non_voter": false}, one per
	// server of the recovered cluster (raft.ReadConfigJSON's format).
	PeersFile = "peers.json"
	// PeersApplied is what PeersFile is renamed to once applied.
	PeersApplied = "peers.info"
)

// peersEntry is one server of PeersFile, decoded strictly (unknown fields
// are refused: a misspelt "non_voter" must not silently make a voter).
type peersEntry struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	NonVoter bool   `json:"non_voter"`
}

// recoverFromPeersFile applies Dir/peers.json when it exists: it validates
// the file against this node (its id must be listed, at this node's raft
// address), replaces the raft configuration with raft.RecoverCluster and
// renames the file to peers.info. It reports whether it recovered. A file
// that is present but invalid, or a node with no raft state to recover, is
// an error naming the file: the node must not start.
func (bt *bootstrap) recoverFromPeersFile(rc *raft.Config, logs raft.LogStore, stable raft.StableStore, snaps raft.SnapshotStore, hasState bool) (bool, error) {
	n := bt.n
	path := filepath.Join(n.cfg.Dir, PeersFile)
	buf, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("replication: read %s: %w", path, err)
	}
	conf, err := parsePeersFile(path, buf, n.cfg.NodeID, string(n.trans.LocalAddr()))
	if err != nil {
		return false, err
	}
	if !hasState {
		return false, fmt.Errorf("replication: %s: this node has no raft state to recover; remove the file and start the node with --join", path)
	}
	n.log.Warn("replication: RECOVERING THE CLUSTER: replacing the raft configuration with "+path, "servers", serverList(conf))
	if err := raft.RecoverCluster(rc, n.fsm, logs, stable, snaps, n.trans, conf); err != nil {
		return false, fmt.Errorf("replication: recover from %s: %w", path, err)
	}
	done := filepath.Join(n.cfg.Dir, PeersApplied)
	if err := os.Rename(path, done); err != nil {
		return false, fmt.Errorf("replication: recovered from %s, but renaming it to %s failed (remove it before the next start): %w", path, done, err)
	}
	n.log.Warn("replication: RECOVERED: the raft configuration is now the one of "+path+"; the file was renamed", "to", done, "servers", serverList(conf))
	return true, nil
}

// parsePeersFile decodes and checks a peers.json for the node self at
// selfAddr: a non-empty list of servers with ids and addresses, no
// duplicates, at least one voter (raft.ReadConfigJSON's checks), no unknown
// fields, and self listed at selfAddr.
func parsePeersFile(path string, buf []byte, self, selfAddr string) (raft.Configuration, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("replication: %s: %s", path, fmt.Sprintf(format, a...))
	}
	dec := json.NewDecoder(bytes.NewReader(buf))
	dec.DisallowUnknownFields()
	var entries []peersEntry
	if err := dec.Decode(&entries); err != nil {
		return raft.Configuration{}, bad("not a JSON list of {\"id\", \"address\", \"non_voter\"}: %v", err)
	}
	if dec.More() {
		return raft.Configuration{}, bad("trailing data after the JSON list")
	}
	if len(entries) == 0 {
		return raft.Configuration{}, bad("lists no server")
	}
	for i, e := range entries {
		if e.ID == "" || e.Address == "" {
			return raft.Configuration{}, bad("server %d has no id or no address", i+1)
		}
	}
	conf, err := raft.ReadConfigJSON(path)
	if err != nil {
		return raft.Configuration{}, bad("%v", err)
	}
	for _, s := range conf.Servers {
		if string(s.ID) != self {
			continue
		}
		if string(s.Address) != selfAddr {
			return raft.Configuration{}, bad("lists this node (%s) at %s, but its raft address is %s", self, s.Address, selfAddr)
		}
		return conf, nil
	}
	return raft.Configuration{}, bad("does not list this node (%s); every server started with it must be in it", self)
}

func serverList(c raft.Configuration) string {
	var b bytes.Buffer
	for i, s := range c.Servers {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s@%s", s.ID, s.Address)
		if s.Suffrage != raft.Voter {
			b.WriteString("(non-voter)")
		}
	}
	return b.String()
}
