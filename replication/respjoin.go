package replication

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// A node with no raft state joins through Config.Join, the RESP address of
// any member (what operators know): it sends RAFT.JOIN there as a Redis
// client would, with AUTH first when Config.Password is set. Everything
// else between nodes goes through the forwarding service on the raft port.

// joinViaRESP sends RAFT.JOIN id raftAddr respAddr to the RESP server at
// addr on a connection of its own, bounded by ctx. The error is the error
// reply (a *RemoteError) or a transport error.
func joinViaRESP(ctx context.Context, addr, password string, args ...string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("replication: dial %s: %w", addr, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	if password != "" {
		writeCommand(w, "AUTH", password)
	}
	writeCommand(w, append([]string{CmdJoin}, args...)...)
	if err := w.Flush(); err != nil {
		return fmt.Errorf("replication: send to %s: %w", addr, err)
	}
	if password != "" {
		if err := readReply(r); err != nil {
			return fmt.Errorf("replication: authenticate to %s: %w", addr, err)
		}
	}
	return readReply(r)
}

func writeCommand(w *bufio.Writer, args ...string) {
	w.WriteByte('*')
	w.WriteString(strconv.Itoa(len(args)))
	w.WriteString("\r\n")
	for _, a := range args {
		w.WriteByte('$')
		w.WriteString(strconv.Itoa(len(a)))
		w.WriteString("\r\n")
		w.WriteString(a)
		w.WriteString("\r\n")
	}
}

// maxReplyLine bounds a reply line read from the join target.
const maxReplyLine = 64 << 10

// readReply reads one simple-string or error reply (all RAFT.JOIN and AUTH
// answer): nil for +OK, the error reply as a *RemoteError, or a transport
// or protocol error.
func readReply(r *bufio.Reader) error {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull && len(line) < maxReplyLine {
			continue
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		break
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return fmt.Errorf("malformed reply line %q", line)
	}
	body := string(line[1 : len(line)-2])
	switch line[0] {
	case '+':
		return nil
	case '-':
		return errorFromReply(body)
	}
	return fmt.Errorf("unexpected reply %q", line)
}
