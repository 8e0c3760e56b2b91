package resp

import (
	"context"
	"testing"
)

// The Envoy rate-limit service's decisions (Server.CountDecision) count in
// the heavy hitters under the command "rls": LIMITER TOP lists them next
// to the limiter commands' keys, and OBJECT FREQ counts them.
func TestCountDecisionFromRLS(t *testing.T) {
	ts := startServer(t, nil)
	c := ts.client(t, 2, "")
	ctx := context.Background()
	const key = "rls:gcra:web_user_u1"
	for range 3200 { // one in 32 is sampled: about 100 samples
		ts.srv.CountDecision([]byte(key), true)
	}
	for range 320 {
		if err := c.Do(ctx, "CL.THROTTLE", "user:1", 0, 1, 60).Err(); err != nil {
			t.Fatal(err)
		}
	}
	top, err := c.Do(ctx, "LIMITER", "TOP", "LIMITED", "COUNT", 5).Slice()
	if err != nil {
		t.Fatal(err)
	}
	cmds := map[string]string{}
	for _, e := range top {
		f := e.([]any)
		cmds[f[0].(string)] = f[1].(string)
	}
	if cmds[key] != "rls" || cmds["user:1"] != "cl.throttle" {
		t.Errorf("LIMITER TOP LIMITED = %v; want %s under rls and user:1 under cl.throttle", top, key)
	}
	if n, err := c.Do(ctx, "OBJECT", "FREQ", key).Int64(); err != nil || n == 0 {
		t.Errorf("OBJECT FREQ %s = %d, %v; want its estimated count", key, n, err)
	}
	// A table that grew to the family reserved for the service would
	// mix the two.
	if n := len(ts.srv.table.all); n >= int(rlsFamily) {
		t.Errorf("the command table has %d entries, want fewer than the rls family %d", n, rlsFamily)
	}
}
