package test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// pathologicalGlob is rule i of the tables below: a glob that a scan of
// the rules one by one matches in time proportional to the key's length,
// and that matches only keys ending in "b<i>".
func pathologicalGlob(i int) string { return fmt.Sprintf("*a*a*a*a*a*a*a*a*b%d", i) }

// ruleValues returns limit-override, limit-shadow and metrics-class values
// of n pathological rules each.
func ruleValues(n int) (override, shadow, classes string) {
	var o, s, c []string
	for i := 0; i < n; i++ {
		p := pathologicalGlob(i)
		o = append(o, p+" 10 1 60")
		s = append(s, p)
		c = append(c, fmt.Sprintf("c%d %s", i, p))
	}
	return strings.Join(o, " "), strings.Join(s, " "), strings.Join(c, " ")
}

// TestRuleTablesBounded (issue 27, case 9): the rule tables filled to
// their cap with pathological globs cost a limiter request on a 10 KB key
// one pass over the key per table, not one per rule: 200 such requests
// answer within a bound that a rule-by-rule scan (about 3,000 scans of
// 10 KB per request) cannot meet; the first matching rule still wins; a
// table past the cap is refused by CONFIG SET and at start-up with the
// setting, the count and the cap.
func TestRuleTablesBounded(t *testing.T) {
	const capRules = 1024
	s := startServer(t, "--metrics-class-limit", "10")
	ctx := ctxT(t)
	// Replies may take long on today's code: the bound below decides, not
	// the client's read timeout.
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Protocol: 2, ReadTimeout: 30 * time.Second})
	t.Cleanup(func() { c.Close() })

	override, shadow, classes := ruleValues(capRules)
	for _, kv := range [][2]string{{"limit-override", override}, {"limit-shadow", shadow}, {"metrics-class", classes}} {
		if err := c.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatalf("CONFIG SET %s (%d rules): %v", kv[0], capRules, err)
		}
	}

	// 200 requests on a 10 KB key no rule matches, pipelined.
	key := strings.Repeat("a", 10<<10)
	const requests = 200
	start := time.Now()
	pipe := c.Pipeline()
	cmds := make([]*redis.Cmd, requests)
	for i := range cmds {
		cmds[i] = pipe.Do(ctx, "CL.THROTTLE", key, 1000, 1, 60)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("%d CL.THROTTLE on a 10 KB key: %v", requests, err)
	}
	took := time.Since(start)
	// A rule-by-rule scan costs 3 × 1024 × 10 KB steps a request (tens of
	// seconds for 200); one pass per table, 3 × 10 KB (milliseconds).
	if took > 10*time.Second {
		t.Errorf("%d CL.THROTTLE on a 10 KB key with 3 × %d rules took %v, want under 10s", requests, capRules, took)
	}
	for i, cmd := range cmds {
		r := ints(t, cmd.Val())
		if len(r) != 5 || r[1] != 1001 {
			t.Fatalf("request %d = %v, want the caller's limit 1001 (no rule matches)", i, r)
		}
	}

	// The one rule matching a key decides, though 1023 rules come before
	// it: rule 1023 (burst 10) overrides and shadows "…b1023".
	r := ints(t, c.Do(ctx, "CL.THROTTLE", key+"b1023", 1000, 1, 60).Val())
	if len(r) != 5 || r[1] != 11 {
		t.Errorf("CL.THROTTLE on a key matching rule 1024 only = %v, want limit 11 (the rule's burst 10)", r)
	}
	info := parseInfo(c.Info(ctx, "stats", "classes").Val())
	if info["limit_overridden_requests"] != "1" || info["shadow_requests"] != "1" {
		t.Errorf("INFO stats: limit_overridden_requests %q, shadow_requests %q, want 1 and 1", info["limit_overridden_requests"], info["shadow_requests"])
	}
	if got := info["class_c1023"]; !strings.Contains(got, "allowed=1,") {
		t.Errorf("INFO classes class_c1023 = %q, want allowed=1", got)
	}

	// Past the cap: refused, naming the setting, the count and the cap;
	// the rules in force stay.
	override, shadow, classes = ruleValues(5000)
	for _, kv := range [][2]string{{"limit-override", override}, {"limit-shadow", shadow}, {"metrics-class", classes}} {
		err := c.ConfigSet(ctx, kv[0], kv[1]).Err()
		want := "ERR CONFIG SET failed (possibly related to argument '" + kv[0] + "') - "
		if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "too many rules: 5000, at most 1024") {
			t.Errorf("CONFIG SET %s (5000 rules) = %v, want %q… too many rules: 5000, at most 1024", kv[0], err, want)
		}
	}
	info = parseInfo(c.Info(ctx, "stats", "classes").Val())
	if info["limit_overrides"] != "1024" || info["limit_shadows"] != "1024" || info["metrics_class_rules"] != "1024" {
		t.Errorf("after the refusals: limit_overrides %q, limit_shadows %q, metrics_class_rules %q, want 1024 each",
			info["limit_overrides"], info["limit_shadows"], info["metrics_class_rules"])
	}

	// At start-up: a process given more than the cap does not start, and
	// says why.
	override, shadow, classes = ruleValues(capRules + 1)
	for _, flag := range [][2]string{{"--limit-override", override}, {"--limit-shadow", shadow}, {"--metrics-class", classes}} {
		p := newServer(t, flag[0], flag[1])
		p.launch()
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s with %d rules: still running after 30s, want a refusal", flag[0], capRules+1)
		}
		out := p.output.String()
		if p.err == nil || !strings.Contains(out, flag[0][2:]) || !strings.Contains(out, "too many rules: 1025, at most 1024") {
			t.Errorf("%s with %d rules: exit %v, output %.300q; want a failure naming %s and the cap", flag[0], capRules+1, p.err, out, flag[0][2:])
		}
	}
}
