"use strict";
// The Express 5 middleware in a real Express app on an ephemeral port,
// against the real server.
const { describe, it } = require("node:test");
const assert = require("node:assert/strict");
const express = require("express");
const limit = require("..");
const { skip, client, serve, rateFields, unique } = require("./helpers");

const second = { name: "second", burst: 1, count: 1, periodMs: 1000 };
const minute = { name: "minute", burst: 9, count: 10, periodMs: 60000 };

async function app(t, policies, options, key = limit.byHeader("X-Key")) {
  const a = express();
  const mw = limit.middleware(await client(t), policies, key, { timeoutMs: 2000, ...options });
  a.get("/hello", mw, (req, res) => res.type("text/plain").send("hello\n"));
  return { base: await serve(t, a), limiter: mw.limiter };
}

describe("Express middleware against cellserver", { skip }, () => {
  it("answers the worked example of docs/http.md: 200, 200, then 429 with Retry-After and problem+json", async (t) => {
    const { base } = await app(t, [second, minute], { legacy: true });
    const headers = { "X-Key": unique("express") };
    const got = [];
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${base}/hello`, { headers });
      got.push({ status: res.status, fields: rateFields(res), type: res.headers.get("content-type"), body: await res.text() });
    }
    assert.deepEqual(got.map((g) => g.status), [200, 200, 429]);
    assert.equal(got[0].body, "hello\n");
    for (const g of got) assert.equal(g.fields["RateLimit-Policy"], `"second";q=2;w=2, "minute";q=10;w=60`);
    assert.match(got[0].fields.RateLimit, /^"second";r=1;t=1, "minute";r=9;t=6$/);
    assert.equal(got[0].fields["Retry-After"], undefined);
    assert.deepEqual([got[0].fields["X-RateLimit-Limit"], got[0].fields["X-RateLimit-Remaining"]], ["2", "1"]);
    // The refusal: the "second" policy binds, "minute" kept its 8.
    const r = got[2];
    assert.match(r.fields.RateLimit, /^"second";r=0;t=[12], "minute";r=8;t=1[12]$/);
    assert.equal(r.fields["Retry-After"], "1");
    assert.deepEqual([r.fields["X-RateLimit-Limit"], r.fields["X-RateLimit-Remaining"]], ["2", "0"]);
    assert.equal(r.type, "application/problem+json");
    assert.deepEqual(JSON.parse(r.body), {
      type: "https://iana.org/assignments/http-problem-types#quota-exceeded",
      title: "Quota Exceeded",
      status: 429,
      detail: "Too many requests: retry in 1 s.",
      "violated-policies": ["second"],
    });
  });

  it("passes a request with no key unlimited and without fields", async (t) => {
    const { base, limiter } = await app(t, [second], {});
    for (let i = 0; i < 4; i++) {
      const res = await fetch(`${base}/hello`);
      assert.equal(res.status, 200);
      assert.deepEqual(rateFields(res), {});
    }
    assert.equal(limiter.counters().round_trips, 0);
  });

  it("leaves Retry-After out when a request can never be allowed", async (t) => {
    const { base } = await app(t, [second], { quantity: () => 3 });
    const res = await fetch(`${base}/hello`, { headers: { "X-Key": unique("huge") } });
    assert.equal(res.status, 429);
    assert.equal(res.headers.get("retry-after"), null);
    assert.match((await res.json()).detail, /can never be allowed/);
  });

  it("calls onDecision and the limited handler, leaves out the IETF fields when asked", async (t) => {
    const seen = [];
    const { base } = await app(t, [{ name: "one", burst: 0, count: 1, periodMs: 60000 }], {
      ietf: false,
      legacy: true,
      onDecision: (req, d) => seen.push(d.allowed),
      limited: (req, res, d) => res.status(418).send(`no: ${d.violated().join(",")}`),
    });
    const headers = { "X-Key": unique("teapot") };
    assert.equal((await fetch(`${base}/hello`, { headers })).status, 200);
    const res = await fetch(`${base}/hello`, { headers });
    assert.equal(res.status, 418);
    assert.equal(await res.text(), "no: one");
    assert.equal(res.headers.get("ratelimit"), null);
    assert.equal(res.headers.get("x-ratelimit-limit"), "1");
    assert.ok(Number(res.headers.get("retry-after")) >= 59);
    assert.deepEqual(seen, [true, false]);
  });
});
