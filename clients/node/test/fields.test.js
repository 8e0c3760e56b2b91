"use strict";
// The shared field table (clients/conformance/fields.json), the one truth
// the Go, Python and Node front doors all pass: each case's server reply,
// fed through the Limiter (its command checked, no server), the deny cache
// when the case says so, and the field formatter, gives exactly the
// expected status, fields and body.
const { describe, it } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const limit = require("..");
const { refusalProblem } = require("../lib/middleware");

const table = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "..", "conformance", "fields.json"), "utf8"));

// replying is a client that answers every command with reply, recording
// the commands, as the server would have answered the case's command.
function replying(reply) {
  return {
    status: "ready",
    sent: [],
    on() {},
    async call(...args) {
      this.sent.push(args.map(String));
      return reply;
    },
  };
}

describe("the shared field table", () => {
  assert.ok(table.cases.length > 0, "no case in fields.json");
  for (const tc of table.cases) {
    it(tc.name, async () => {
      const policies = tc.policies.map((p) => ({ name: p.name, algorithm: p.algorithm, burst: p.burst, count: p.count, periodMs: p.period_ms }));
      let clock = 0;
      const c = replying(tc.reply);
      const l = new limit.Limiter(c, policies, { now: () => clock });
      if (tc.expect.error !== undefined) {
        // A reply that is not a limiter reply is no decision: the request
        // is failed open or closed, never decided from it.
        const errorClass = { bad_reply: limit.BadReplyError }[tc.expect.error];
        assert.ok(errorClass, `unknown expected error ${JSON.stringify(tc.expect.error)}`);
        await assert.rejects(l.allowN(tc.key, tc.quantity), errorClass);
        assert.deepEqual(c.sent[0], tc.expect.command);
        assert.deepEqual(l.counters(), { decisions: 0, local: 0, round_trips: 1, errors: 1 });
        return;
      }
      let d = await l.allowN(tc.key, tc.quantity);
      if (tc.cached_ms !== undefined) {
        clock += tc.cached_ms;
        d = await l.allowN(tc.key, tc.quantity);
        assert.equal(d.local, true, "the deny cache did not answer");
        assert.equal(c.sent.length, 1, "the deny cache made a round trip");
      }
      if (tc.expect.command) assert.deepEqual(c.sent[0], tc.expect.command);
      assert.equal(d.allowed ? 200 : 429, tc.expect.status);
      const fields = limit.decisionFields(d, l.policyField, { legacy: tc.legacy });
      for (const [name, want] of Object.entries(tc.expect.headers)) {
        assert.equal(fields[name], want, name);
      }
      for (const name of tc.expect.absent || []) {
        assert.equal(fields[name], undefined, `${name} must be absent`);
      }
      if (tc.expect.body) assert.deepEqual(refusalProblem(d), tc.expect.body);
    });
  }
});
