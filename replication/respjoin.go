package replication

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cellserver/cellserver/internal/respclient"
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
	cfg := respclient.Config{Password: password, MaxArray: maxReplyElems}
	if dl, ok := ctx.Deadline(); ok {
		cfg.Timeout = time.Until(dl)
	}
	c, err := respclient.Dial(ctx, addr, cfg)
	if err != nil {
		return nil, remote(err)
	}
	defer c.Close()
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	v, err := c.Do(b...)
	if err != nil {
		return nil, err
	}
	return flatten(v)
}

// remote turns an error reply into a *RemoteError (the sentinel mapping of
// errorFromReply); other errors are returned as they are.
func remote(err error) error {
	var re *respclient.ReplyError
	if errors.As(err, &re) {
		return errorFromReply(re.Msg)
	}
	return err
}

// flatten returns v as callRESP does.
func flatten(v respclient.Value) ([]string, error) {
	switch v.Kind {
	case respclient.Error:
		return nil, errorFromReply(v.Str)
	case respclient.Simple, respclient.Null:
		return nil, nil
	case respclient.Bulk:
		return []string{v.Str}, nil
	case respclient.Integer:
		return []string{strconv.FormatInt(v.Int, 10)}, nil
	}
	out := make([]string, 0, len(v.Elems))
	for _, e := range v.Elems {
		switch e.Kind {
		case respclient.Bulk, respclient.Simple:
			out = append(out, e.Str)
		case respclient.Integer:
			out = append(out, strconv.FormatInt(e.Int, 10))
		default:
			return nil, fmt.Errorf("replication: unexpected nested reply of kind %c", e.Kind)
		}
	}
	return out, nil
}

// maxReplyElems bounds the elements of an array reply from another node.
const maxReplyElems = 64
