package resp

import "github.com/cellserver/cellserver/replication"

// The RAFT.* commands. ROLE, INFO replication and the CLUSTER commands
// read the node through Config.Cluster (replication.ClusterView); the
// replication package's errors are worded for the wire by errors.go.

// RegisterCluster adds the cluster commands to s, backed by n: RAFT.JOIN,
// RAFT.REMOVE, RAFT.HELLO and RAFT.INFO. Nodes forward writes and reads to the leader
// through the replication package's own service on the raft port, not
// through RESP. Call it once, before s serves.
func RegisterCluster(s *Server, n *replication.Node) {
	s.raft = n
	for _, cmd := range commands(registerRaft) {
		s.Handle(cmd)
	}
}

func raftJoinHandler(c *Conn, args [][]byte) error {
	if err := c.srv.raft.Members().Join(c.srv.ctx, string(args[1]), string(args[2]), string(args[3])); err != nil {
		return err
	}
	c.WriteOK()
	return nil
}

func raftRemoveHandler(c *Conn, args [][]byte) error {
	if err := c.srv.raft.Members().Remove(c.srv.ctx, string(args[1])); err != nil {
		return err
	}
	c.WriteOK()
	return nil
}

func raftHelloHandler(c *Conn, _ [][]byte) error {
	writeFieldMap(c, c.srv.raft.Hello().Fields())
	return nil
}

func raftInfoHandler(c *Conn, _ [][]byte) error {
	inf := c.srv.raft.Info()
	c.WriteBulk(appendFields(nil, inf.RaftFields()))
	return nil
}

// writeFieldMap writes fields as a map of bulk strings, in order.
func writeFieldMap(c *Conn, fields [][2]string) {
	c.WriteMap(len(fields))
	for _, kv := range fields {
		c.WriteBulkString(kv[0])
		c.WriteBulkString(kv[1])
	}
}

// appendFields appends fields to b as INFO's name:value lines.
func appendFields(b []byte, fields [][2]string) []byte {
	for _, f := range fields {
		b = field(b, f[0], f[1])
	}
	return b
}
