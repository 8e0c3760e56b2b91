package resp

import (
	"strings"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/acllog"
	"github.com/cellserver/cellserver/internal/authguard"
)

// logAuthFailure adds a refused authentication of c's current command to
// ACL LOG (internal/acllog).
func logAuthFailure(c *Conn, reason, context, object, username string) {
	now := c.srv.now()
	c.srv.acllog.Add(acllog.Entry{Reason: reason, Context: context, Object: object, Username: username,
		Addr:       authguard.AddrKey(c.nc.RemoteAddr()),
		ClientInfo: strings.TrimSuffix(string(appendClientLine(nil, c, now)), "\n")}, now/1e6)
}

func aclWhoamiHandler(c *Conn, _ [][]byte) error { c.WriteBulkString("default"); return nil }

func aclLogHandler(c *Conn, args [][]byte) error {
	n := int64(10)
	if len(args) == 3 {
		if equalFoldString(args[2], "reset") {
			c.srv.acllog.Reset()
			c.WriteOK()
			return nil
		}
		v, err := engine.ParseInt(args[2])
		if err != nil {
			return err
		}
		if v < 0 {
			return errNegative
		}
		n = v
	}
	now := c.srv.now() / 1e6
	entries := c.srv.acllog.Newest(int(min(n, acllog.MaxLen)))
	c.WriteArray(len(entries))
	for _, e := range entries {
		c.WriteMap(10)
		c.WriteBulkString("count")
		c.WriteInt(e.Count)
		c.WriteBulkString("reason")
		c.WriteBulkString(e.Reason)
		c.WriteBulkString("context")
		c.WriteBulkString(e.Context)
		c.WriteBulkString("object")
		c.WriteBulkString(e.Object)
		c.WriteBulkString("username")
		c.WriteBulkString(e.Username)
		c.WriteBulkString("age-seconds")
		c.WriteDouble(float64(max(now-e.Updated, 0)) / 1000)
		c.WriteBulkString("client-info")
		c.WriteBulkString(e.ClientInfo)
		c.WriteBulkString("entry-id")
		c.WriteInt(e.ID)
		c.WriteBulkString("timestamp-created")
		c.WriteInt(e.Created)
		c.WriteBulkString("timestamp-last-updated")
		c.WriteInt(e.Updated)
	}
	return nil
}
