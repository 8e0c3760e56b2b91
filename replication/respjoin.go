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

// A node with no raft state talks to the nodes listed in Config.Join over
// RESP, as a Redis client would (what operators know are RESP addresses):
// RAFT.HELLO to learn whether they belong to a cluster (bootstrap.go), and
// RAFT.JOIN to be added to one, each with AUTH first when Config.Password is
// set. Everything else between nodes goes through the forwarding service on
// the raft port.

// joinViaRESP sends RAFT.JOIN id raftAddr respAddr to the RESP server at
// addr on a connection of its own, bounded by ctx. The error is the error
// reply (a *RemoteError) or a transport error.
func joinViaRESP(ctx context.Context, addr, password string, args ...string) error {
	_, err := callRESP(ctx, addr, password, append([]string{CmdJoin}, args...)...)
	return err
}

// helloViaRESP sends RAFT.HELLO to the RESP server at addr, bounded by ctx,
// and decodes the answer.
func helloViaRESP(ctx context.Context, addr, password string) (Hello, error) {
	v, err := callRESP(ctx, addr, password, CmdHello)
	if err != nil {
		return Hello{}, err
	}
	h, err := decodeHello(v)
	if err != nil {
		return Hello{}, fmt.Errorf("replication: %s from %s: %w", CmdHello, addr, err)
	}
	return h, nil
}

// callRESP sends one command (after AUTH when password is set) to the RESP
// server at addr on a connection of its own, bounded by ctx, and returns
// the reply: nil for a simple string, the text of a bulk string or integer,
// or the elements of a flat array of those. An error reply is returned as a
// *RemoteError.
func callRESP(ctx context.Context, addr, password string, args ...string) ([]string, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("replication: dial %s: %w", addr, err)
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
	writeCommand(w, args...)
	if err := w.Flush(); err != nil {
		return nil, fmt.Errorf("replication: send to %s: %w", addr, err)
	}
	if password != "" {
		if _, err := readReply(r); err != nil {
			return nil, fmt.Errorf("replication: authenticate to %s: %w", addr, err)
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

// maxReplyLine bounds a reply line read from another node, and
// maxReplyElems the elements of an array reply.
const (
	maxReplyLine  = 64 << 10
	maxReplyElems = 64
)

// readReply reads one reply: nil for a simple string (+OK), one element for
// a bulk string or an integer, the elements of an array (or RESP3 map) of
// those; an error reply as a *RemoteError; otherwise a transport or
// protocol error.
func readReply(r *bufio.Reader) ([]string, error) {
	line, err := readLine(r)
	if err != nil {
		return nil, err
	}
	switch line[0] {
	case '+':
		return nil, nil
	case '-':
		return nil, errorFromReply(line[1:])
	case '*', '%':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 || n > maxReplyElems {
			return nil, fmt.Errorf("unexpected array header %q", line)
		}
		if line[0] == '%' {
			n *= 2
		}
		out := make([]string, 0, n)
		for range n {
			e, err := readLine(r)
			if err != nil {
				return nil, err
			}
			s, err := readScalar(r, e)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	}
	s, err := readScalar(r, line)
	if err != nil {
		return nil, err
	}
	return []string{s}, nil
}

// readScalar decodes a bulk string (whose header is line) or an integer.
func readScalar(r *bufio.Reader, line string) (string, error) {
	switch line[0] {
	case ':', '+':
		return line[1:], nil
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 || n > maxReplyLine {
			return "", fmt.Errorf("unexpected bulk header %q", line)
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return "", noEOF(err)
		}
		if b[n] != '\r' || b[n+1] != '\n' {
			return "", fmt.Errorf("bulk string of %d bytes not followed by CRLF", n)
		}
		return string(b[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

// readLine reads one CRLF-terminated line, at most maxReplyLine bytes, and
// returns it without the CRLF (never empty).
func readLine(r *bufio.Reader) (string, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull && len(line) < maxReplyLine {
			continue
		}
		if err != nil {
			return "", noEOF(err)
		}
		break
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return "", fmt.Errorf("malformed reply line %q", line)
	}
	return string(line[:len(line)-2]), nil
}
