"use strict";
const { describe, it } = require("node:test");
const assert = require("node:assert/strict");
const limit = require("..");
const { skip, unique, client } = require("./helpers");

const second = { name: "second", burst: 1, count: 1, periodMs: 1000 };
const minute = { name: "minute", burst: 9, count: 10, periodMs: 60000 };

describe("policies", () => {
  // Each is refused at construction, as httplimit refuses it.
  const fake = { call() {}, on() {} };
  const bad = [
    ["no policy", []],
    ["empty name", [{ name: "", count: 1, periodMs: 1000 }]],
    ["long name", [{ name: "x".repeat(65), count: 1, periodMs: 1000 }]],
    ["brace in name", [{ name: "a{b}", count: 1, periodMs: 1000 }]],
    ["negative burst", [{ name: "p", burst: -1, count: 1, periodMs: 1000 }]],
    ["burst above 2^40", [{ name: "p", burst: 2 ** 40 + 1, count: 1, periodMs: 1000 }]],
    ["zero count", [{ name: "p", count: 0, periodMs: 1000 }]],
    ["fractional count", [{ name: "p", count: 1.5, periodMs: 1000 }]],
    ["zero period", [{ name: "p", count: 1, periodMs: 0 }]],
    ["period above 3660 days", [{ name: "p", count: 1, periodMs: 3661 * 86400000 }]],
    ["GCRA period not whole seconds", [{ name: "p", count: 1, periodMs: 1500 }]],
    ["fractional ms", [{ name: "p", algorithm: "token-bucket", burst: 1, count: 1, periodMs: 1.5 }]],
    ["bucket without capacity", [{ name: "p", algorithm: "leaky-bucket", burst: 0, count: 1, periodMs: 1000 }]],
    ["window with burst", [{ name: "p", algorithm: "fixed-window", burst: 1, count: 1, periodMs: 1000 }]],
    ["unknown algorithm", [{ name: "p", algorithm: "magic", count: 1, periodMs: 1000 }]],
    ["name used twice", [second, { ...minute, name: "second" }]],
    ["several, not all GCRA", [second, { name: "w", algorithm: "sliding-window", count: 5, periodMs: 1000 }]],
  ];
  for (const [name, policies] of bad) {
    it(`refuses ${name}`, () => {
      assert.throws(() => new limit.Limiter(fake, policies), limit.InvalidPolicyError);
    });
  }
  for (const [name, opts] of [
    ["a zero timeout", { timeoutMs: 0 }],
    ["a brace in the prefix", { keyPrefix: "a{" }],
    ["zero breaker failures", { circuitBreaker: { failures: 0 } }],
    ["a negative deny cache", { denyCacheMs: -1 }],
  ]) {
    it(`refuses ${name}`, () => {
      assert.throws(() => new limit.Limiter(fake, [second], opts), limit.InvalidOptionError);
    });
  }

  it("derives RateLimit-Policy as httplimit does", () => {
    const cases = [
      [[second, minute], `"second";q=2;w=2, "minute";q=10;w=60`],
      [[{ name: "u", burst: 15, count: 30, periodMs: 60000 }], `"u";q=16;w=32`],
      [[{ name: "tb", algorithm: "token-bucket", burst: 60, count: 60, periodMs: 60000 }], `"tb";q=60;w=60`],
      [[{ name: "i", algorithm: "token-bucket-interval", burst: 10, count: 4, periodMs: 4000 }], `"i";q=10;w=12`],
      [[{ name: "lb", algorithm: "leaky-bucket", burst: 1, count: 1000, periodMs: 1 }], `"lb";q=1;w=1`],
      [[{ name: "fw", algorithm: "fixed-window", count: 50, periodMs: 1500 }], `"fw";q=50;w=2`],
      [[{ name: "big", burst: 2 ** 40, count: 1, periodMs: 3660 * 86400000 }], `"big";q=1099511627777;w=999999999999999`],
    ];
    for (const [policies, want] of cases) {
      assert.equal(new limit.Limiter(fake, policies).policyField, want);
    }
  });

  it("keys as httplimit does, hashing odd keys", () => {
    const l = new limit.Limiter(fake, [second], { keyPrefix: "app:" });
    assert.equal(l.serverKey("second", "ip:192.0.2.1"), "app:second:{ip:192.0.2.1}");
    const hashed = /^app:second:\{=[A-Za-z0-9_-]{43}\}$/;
    for (const odd of ["", "x".repeat(129), "a{b", "a}b", "=x"]) {
      assert.match(l.serverKey("second", odd), hashed, JSON.stringify(odd));
    }
    assert.equal(l.serverKey("second", "x".repeat(128)), `app:second:{${"x".repeat(128)}}`);
    // SHA-256 of "" in unpadded base64url, as Go's hashTag gives it.
    assert.equal(l.serverKey("s", ""), "app:s:{=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU}");
    assert.notEqual(l.serverKey("s", "a{b"), l.serverKey("s", "a}b"));
  });
});

describe("keys", () => {
  const req = (remoteAddress, xff, extra = {}) => ({ socket: { remoteAddress }, headers: { ...(xff ? { "x-forwarded-for": xff } : {}), ...extra } });
  const trusted = limit.byIP(["10.0.0.0/8", "2001:db8:ffff::/48"]);
  const cases = [
    ["IPv4 peer", limit.byIP(), req("192.0.2.1"), "ip:192.0.2.1"],
    ["IPv4-mapped peer", limit.byIP(), req("::ffff:192.0.2.1"), "ip:192.0.2.1"],
    ["IPv6 by /64", limit.byIP(), req("2001:db8:1:2:3:4:5:6"), "ip:2001:db8:1:2::/64"],
    ["IPv6 with zone", limit.byIP(), req("fe80::1%eth0"), "ip:fe80::/64"],
    ["untrusted peer ignores XFF", limit.byIP(), req("192.0.2.1", "203.0.113.9"), "ip:192.0.2.1"],
    ["trusted peer: first untrusted from the right", trusted, req("10.0.0.1", "198.51.100.1, 203.0.113.9, 10.2.2.2"), "ip:203.0.113.9"],
    ["a bad entry stops at the last trusted hop", trusted, req("10.0.0.1", "203.0.113.9, junk, 10.2.2.2"), "ip:10.2.2.2"],
    ["trusted all the way: the left-most", trusted, req("10.0.0.1", "10.3.3.3, 10.2.2.2"), "ip:10.3.3.3"],
    ["IPv6 proxy", trusted, req("2001:db8:ffff::1", "[2001:db8:1::7]:4711"), "ip:2001:db8:1::/64"],
    ["no IP", limit.byIP(), req(undefined), null],
    ["header", limit.byHeader("X-Api-Key"), req("192.0.2.1", "", { "x-api-key": "  abc " }), "x-api-key:abc"],
    ["no header", limit.byHeader("X-Api-Key"), req("192.0.2.1"), null],
    ["first key", limit.firstKey(limit.byUser(() => null), limit.byIP()), req("192.0.2.1"), "ip:192.0.2.1"],
    ["user", limit.firstKey(limit.byUser(() => "42"), limit.byIP()), req("192.0.2.1"), "user:42"],
  ];
  for (const [name, fn, r, want] of cases) {
    it(name, () => assert.equal(fn(r), want));
  }
  it("refuses a trusted proxy that is not a prefix", () => {
    assert.throws(() => limit.byIP(["10.0.0.1"]), limit.InvalidOptionError);
  });
});

describe("Limiter against cellserver", { skip }, () => {
  it("decides several GCRA policies atomically with CL.THROTTLEALL", async (t) => {
    const c = (await client(t));
    const l = new limit.Limiter(c, [second, minute], { timeoutMs: 2000 });
    const key = unique("atomic");
    const d1 = await l.allow(key);
    assert.equal(d1.allowed, true);
    assert.deepEqual(d1.results.map((r) => [r.policy, r.limit, r.remaining]), [["second", 2, 1], ["minute", 10, 9]]);
    await l.allow(key);
    const d3 = await l.allow(key);
    assert.equal(d3.allowed, false);
    assert.deepEqual(d3.violated(), ["second"]);
    assert.equal(d3.binding(), 0);
    assert.ok(d3.retryAfterMs() >= 1000 && d3.retryAfterMs() % 1000 === 0, `retryAfterMs ${d3.retryAfterMs()}`);
    // The refusal consumed nothing from "minute".
    assert.equal(d3.results[1].remaining, 8);
    assert.equal(await c.exists(l.serverKey("second", key), l.serverKey("minute", key)), 2);
    assert.deepEqual(l.counters(), { decisions: 3, local: 0, round_trips: 3, errors: 0 });
  });

  // One policy of each algorithm, each with its own command: limit 2, so
  // the third request is refused with a wait in milliseconds.
  const one = [
    { name: "gcra", burst: 1, count: 1, periodMs: 60000 },
    { name: "tb", algorithm: "token-bucket", burst: 2, count: 1, periodMs: 60000 },
    { name: "tbi", algorithm: "token-bucket-interval", burst: 2, count: 1, periodMs: 60000 },
    { name: "lb", algorithm: "leaky-bucket", burst: 2, count: 1, periodMs: 60000 },
    { name: "fw", algorithm: "fixed-window", count: 2, periodMs: 3600000 },
    { name: "sw", algorithm: "sliding-window", count: 2, periodMs: 60000 },
    { name: "sl", algorithm: "sliding-log", count: 2, periodMs: 60000 },
  ];
  for (const p of one) {
    it(`decides ${p.algorithm || "gcra"} with its own command`, async (t) => {
      const c = (await client(t));
      const l = new limit.Limiter(c, [p], { timeoutMs: 2000, denyCacheMs: 0 });
      const key = unique(p.name);
      const got = [];
      for (let i = 0; i < 3; i++) got.push(await l.allow(key));
      assert.deepEqual(got.map((d) => d.allowed), [true, true, false]);
      assert.equal(got[2].results[0].limit, 2);
      assert.ok(got[2].retryAfterMs() > 0, `retryAfterMs ${got[2].retryAfterMs()}`);
      assert.equal(await c.type(l.serverKey(p.name, key)), p.algorithm === "token-bucket-interval" ? "token-bucket" : p.algorithm || "gcra");
    });
  }

  it("peeks with quantity 0 and refuses a bad quantity without a round trip", async (t) => {
    const l = new limit.Limiter((await client(t)), [second], { timeoutMs: 2000 });
    const key = unique("peek");
    const d = await l.allowN(key, 0);
    assert.equal(d.results[0].remaining, 2);
    for (const n of [-1, 1.5, 2 ** 40 + 1]) {
      await assert.rejects(l.allowN(key, n), limit.InvalidQuantityError);
    }
    assert.equal(l.counters().round_trips, 1);
  });

  it("reports an error reply without opening the breaker", async (t) => {
    const c = (await client(t));
    const key = unique("wrongtype");
    const l = new limit.Limiter(c, [second], { timeoutMs: 2000, circuitBreaker: { failures: 1 } });
    await c.call("FW.INCR", l.serverKey("second", key), 5, "1h");
    for (let i = 0; i < 3; i++) {
      await assert.rejects(l.allow(key), (err) => err instanceof limit.ServerError && /WRONGTYPE/.test(err.message));
    }
    // Every one of them went to the server: an error reply is from a server that is up.
    assert.deepEqual(l.counters(), { decisions: 0, local: 0, round_trips: 3, errors: 3 });
  });
});
