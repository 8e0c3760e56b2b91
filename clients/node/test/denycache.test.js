"use strict";
// The deny cache: a refused key is answered locally until its retry_after
// (capped) passes; it never admits; round trips are counted.
const { describe, it } = require("node:test");
const assert = require("node:assert/strict");
const limit = require("..");
const { DenyCache } = require("../lib/denycache");
const { Decision } = require("../lib/decision");
const { skip, client, unique } = require("./helpers");

// "minute": 1 at once, 1 a minute: the second request is refused for 60 s.
const minute = { name: "minute", burst: 0, count: 1, periodMs: 60000 };

describe("deny cache against cellserver", { skip }, () => {
  it("answers a refused key locally, with its times reduced, until the cap passes", async (t) => {
    let clock = 0;
    const l = new limit.Limiter(await client(t), [minute], { timeoutMs: 2000, now: () => clock });
    const key = unique("deny");
    assert.equal((await l.allow(key)).allowed, true);
    const refused = await l.allow(key);
    assert.equal(refused.allowed, false);
    assert.equal(refused.local, false);
    const retry = refused.retryAfterMs();
    assert.ok(retry > 58000, `retryAfterMs ${retry}`);
    // 100 more requests within the cap (1 s by default): none reaches the server.
    for (let i = 0; i < 100; i++) {
      clock += 9;
      const d = await l.allow(key);
      assert.equal(d.allowed, false);
      assert.equal(d.local, true);
    }
    const d = await l.allow(key);
    assert.equal(d.retryAfterMs(), retry - 900);
    assert.equal(d.results[0].resetAfterMs, refused.results[0].resetAfterMs - 900);
    assert.equal(d.results[0].remaining, refused.results[0].remaining);
    assert.deepEqual(l.counters(), { decisions: 103, local: 101, round_trips: 2, errors: 0 });
    // Another key, or the same key with another quantity, still asks the server.
    assert.equal((await l.allow(unique("other"))).allowed, true);
    assert.equal((await l.allowN(key, 0)).local, false);
    // Once the cap passes, the server decides again (and still refuses).
    clock += 100;
    const again = await l.allow(key);
    assert.equal(again.local, false);
    assert.equal(again.allowed, false);
    assert.equal(l.counters().round_trips, 5);
  });

  it("obeys an operator who deletes the key once the cap passes", async (t) => {
    let clock = 0;
    const c = await client(t);
    const l = new limit.Limiter(c, [minute], { timeoutMs: 2000, now: () => clock, denyCacheMs: 250 });
    const key = unique("reset");
    await l.allow(key);
    assert.equal((await l.allow(key)).allowed, false);
    await c.del(l.serverKey("minute", key));
    clock += 249;
    assert.equal((await l.allow(key)).local, true);
    clock += 1;
    assert.equal((await l.allow(key)).allowed, true);
  });

  it("is off with denyCacheMs 0: every request is a round trip", async (t) => {
    const l = new limit.Limiter(await client(t), [minute], { timeoutMs: 2000, denyCacheMs: 0 });
    const key = unique("off");
    for (let i = 0; i < 5; i++) await l.allow(key);
    assert.deepEqual(l.counters(), { decisions: 5, local: 0, round_trips: 5, errors: 0 });
  });
});

describe("deny cache entries", () => {
  const refusal = (retryAfterMs) =>
    new Decision(false, [{ policy: "p", limited: true, limit: 1, remaining: 0, retryAfterMs, resetAfterMs: 5000 }]);

  it("lives min(retry_after, max), and the max for a request that can never be allowed", () => {
    let clock = 0;
    const cache = new DenyCache(1000, 10, () => clock);
    cache.put("short", 1, refusal(300));
    cache.put("long", 1, refusal(60000));
    cache.put("never", 1, refusal(-1));
    cache.put("allowed", 1, new Decision(true, [{ policy: "p", limited: false, limit: 1, remaining: 0, retryAfterMs: -1, resetAfterMs: 1 }]));
    clock = 299;
    assert.equal(cache.get("short", 1).retryAfterMs(), 1);
    assert.equal(cache.get("allowed", 1), null);
    clock = 300;
    assert.equal(cache.get("short", 1), null);
    clock = 999;
    assert.ok(cache.get("long", 1));
    assert.equal(cache.get("never", 1).retryAfterMs(), null);
    clock = 1000;
    assert.equal(cache.get("long", 1), null);
    assert.equal(cache.get("never", 1), null);
  });

  it("holds at most its size, dropping the oldest", () => {
    const cache = new DenyCache(1000, 3, () => 0);
    for (const k of ["a", "b", "c", "d"]) cache.put(k, 1, refusal(500));
    assert.equal(cache.get("a", 1), null);
    for (const k of ["b", "c", "d"]) assert.ok(cache.get(k, 1), k);
    assert.equal(cache.entries.size, 3);
  });
});
