"use strict";
// With no server (a closed port) or a server that never answers: fail
// open, fail closed, the timeout and the circuit breaker.
const { describe, it } = require("node:test");
const assert = require("node:assert/strict");
const net = require("node:net");
const { performance } = require("node:perf_hooks");
const express = require("express");
const limit = require("..");
const { closedPort, serve, rateFields } = require("./helpers");

const policies = [
  { name: "burst", burst: 19, count: 10, periodMs: 1000 },
  { name: "daily", burst: 9999, count: 10000, periodMs: 86400000 },
];

// A generous bound for a loaded machine that still tells a fast failure
// from one that waits for timeouts or reconnects (the default timeout is
// 100 ms; five of them in a row would be 0.5 s).
const FAST_MS = 500;

async function appOn(t, address, options) {
  const c = limit.createClient(address);
  t.after(() => c.disconnect());
  const errors = [];
  const mw = limit.middleware(c, policies, limit.byIP(), { onError: (req, err) => errors.push(err), ...options });
  const a = express();
  a.get("/hello", mw, (req, res) => res.send("hello\n"));
  a.get("/warm", (req, res) => res.send("warm\n"));
  return { base: await serve(t, a), limiter: mw.limiter, errors };
}

describe("a closed port", () => {
  for (const failClosed of [false, true]) {
    it(`answers ${failClosed ? "503 (fail closed)" : "200 (fail open)"} at once, the breaker open after one refused connection`, async (t) => {
      const { base, limiter, errors } = await appOn(t, `127.0.0.1:${await closedPort()}`, { failClosed });
      await (await fetch(`${base}/warm`)).text(); // the HTTP client's own first-use costs, not timed
      for (let i = 0; i < 10; i++) {
        const start = performance.now();
        const res = await fetch(`${base}/hello`);
        const ms = performance.now() - start;
        const body = await res.text();
        assert.ok(ms < FAST_MS, `request ${i + 1} took ${ms.toFixed(0)} ms, want < ${FAST_MS}`);
        assert.deepEqual(rateFields(res), {});
        if (failClosed) {
          assert.equal(res.status, 503);
          assert.equal(res.headers.get("content-type"), "application/problem+json");
          assert.deepEqual(JSON.parse(body), {
            type: "about:blank",
            title: "Service Unavailable",
            status: 503,
            detail: "The rate limiter is unavailable.",
          });
        } else {
          assert.equal(res.status, 200);
          assert.equal(body, "hello\n");
        }
      }
      // One round trip found the port closed; the breaker answered the rest.
      assert.deepEqual(limiter.counters(), { decisions: 0, local: 0, round_trips: 1, errors: 10 });
      assert.equal(errors[0].connectionError.code, "ECONNREFUSED");
      assert.ok(errors.slice(1).every((e) => e instanceof limit.CircuitOpenError));
    });
  }

  it("probes once per cool-down while the server stays down", async () => {
    const c = limit.createClient(`127.0.0.1:${await closedPort()}`);
    try {
      let clock = 0;
      const l = new limit.Limiter(c, policies, { now: () => clock, circuitBreaker: { failures: 5, coolDownMs: 1000 } });
      await assert.rejects(l.allow("k"), limit.ServerError);
      await assert.rejects(l.allow("k"), limit.CircuitOpenError);
      clock += 1000; // cool-down over: the next one probes, and fails
      await assert.rejects(l.allow("k"), limit.ServerError);
      await assert.rejects(l.allow("k"), limit.CircuitOpenError);
      assert.equal(l.counters().round_trips, 2);
    } finally {
      c.disconnect();
    }
  });
});

describe("a server that never answers", () => {
  it("times out at timeoutMs, and five timeouts in a row open the breaker", async (t) => {
    const silent = net.createServer((sock) => sock.on("data", () => {})); // reads, never answers
    await new Promise((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const conns = new Set();
    silent.on("connection", (s) => conns.add(s));
    t.after(() => {
      for (const s of conns) s.destroy();
      silent.close();
    });
    // The connection opens but nothing ever answers, not even the
    // client's handshake: every decision waits for the timeout.
    const c = limit.createClient(`127.0.0.1:${silent.address().port}`);
    t.after(() => c.disconnect());
    const l = new limit.Limiter(c, policies, { timeoutMs: 50 });
    for (let i = 0; i < 5; i++) {
      const start = performance.now();
      await assert.rejects(l.allow("k"), limit.TimeoutError);
      const ms = performance.now() - start;
      assert.ok(ms >= 45 && ms < 50 + FAST_MS, `timeout ${i + 1} after ${ms.toFixed(0)} ms, want about 50`);
    }
    const start = performance.now();
    await assert.rejects(l.allow("k"), limit.CircuitOpenError);
    assert.ok(performance.now() - start < FAST_MS);
    assert.deepEqual(l.counters(), { decisions: 0, local: 0, round_trips: 5, errors: 6 });
  });
});
