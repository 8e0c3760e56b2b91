package resp

import "github.com/cellserver/cellserver/engine"

func memoryUsageHandler(c *Conn, args [][]byte) error {
	if len(args) != 3 && (len(args) != 5 || !equalFoldString(args[3], "samples")) {
		return engine.ErrSyntax
	}
	if len(args) == 5 {
		if _, err := engine.ParseInt(args[4]); err != nil {
			return err
		}
	}
	now, err := c.readNow()
	if err != nil {
		return err
	}
	n, ok := c.srv.backend.Store().KeyBytes(args[2], now)
	if !ok {
		c.WriteNull()
		return nil
	}
	c.WriteInt(n)
	return nil
}
