"use strict";
// The example program as an operator runs it: its command line, 20
// allowed then 429, fail open and closed on a closed port, and a flood on
// one key that the deny cache keeps away from the server. Against the real
// server at CELLSERVER_ADDR (test/clients_node_test.go sets it).
const { describe, it } = require("node:test");
const assert = require("node:assert/strict");
const { spawn } = require("node:child_process");
const net = require("node:net");
const path = require("node:path");
const { performance } = require("node:perf_hooks");

const addr = process.env.CELLSERVER_ADDR || "";
const skip = addr ? false : "CELLSERVER_ADDR is not set (test/clients_node_test.go sets it)";

// start runs app.js with args and resolves to its base URL once it prints
// "listening on HOST:PORT".
function start(t, ...args) {
  const child = spawn(process.execPath, [path.join(__dirname, "..", "app.js"), "--listen", "127.0.0.1:0", ...args], { stdio: ["ignore", "pipe", "pipe"] });
  t.after(() => child.kill());
  let stderr = "";
  child.stderr.on("data", (b) => (stderr += b));
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (b) => {
      out += b;
      const m = out.match(/^listening on (\S+)\n/);
      if (m) resolve(`http://${m[1]}`);
    });
    child.on("exit", (code) => reject(new Error(`app.js exited ${code} before listening: ${stderr}`)));
  });
}

async function closedPort() {
  const s = net.createServer();
  await new Promise((resolve) => s.listen(0, "127.0.0.1", resolve));
  const { port } = s.address();
  await new Promise((resolve) => s.close(resolve));
  return port;
}

async function vars(base) {
  return (await (await fetch(`${base}/debug/vars`)).json()).limiter;
}

describe("examples/node/app.js", { skip }, () => {
  it("allows 20 at once, then answers 429 with Retry-After and problem+json", async (t) => {
    const base = await start(t, "--cellserver", addr);
    const start0 = performance.now();
    let allowed = 0;
    let refused;
    while (!refused && allowed < 200) {
      const res = await fetch(`${base}/hello`);
      const body = await res.text();
      if (res.status === 200) {
        assert.equal(body, "hello\n");
        allowed++;
      } else {
        refused = { res, body };
      }
    }
    const seconds = (performance.now() - start0) / 1000;
    assert.ok(allowed >= 20 && allowed <= 20 + Math.ceil(10 * seconds), `${allowed} allowed in ${seconds.toFixed(2)} s`);
    assert.equal(refused.res.status, 429);
    assert.equal(refused.res.headers.get("retry-after"), "1");
    assert.equal(refused.res.headers.get("content-type"), "application/problem+json");
    assert.equal(refused.res.headers.get("x-ratelimit-remaining"), "0");
    assert.deepEqual(JSON.parse(refused.body)["violated-policies"], ["burst"]);
    const c = await vars(base);
    assert.equal(c.decisions, allowed + 1);
    assert.equal(c.errors, 0);
  });

  for (const failClosed of [false, true]) {
    it(`answers ${failClosed ? 503 : 200} within 0.5 s with the server's port closed`, async (t) => {
      const base = await start(t, "--cellserver", `127.0.0.1:${await closedPort()}`, ...(failClosed ? ["--fail-closed"] : []));
      await vars(base); // the HTTP client's first-use costs, not timed
      for (let i = 0; i < 6; i++) {
        const t0 = performance.now();
        const res = await fetch(`${base}/hello`);
        await res.text();
        const ms = performance.now() - t0;
        assert.equal(res.status, failClosed ? 503 : 200);
        assert.ok(ms < 500, `request ${i + 1} took ${ms.toFixed(0)} ms`);
      }
      const c = await vars(base);
      assert.equal(c.round_trips, 1, "the breaker did not open at the first refused connection");
    });
  }

  it("keeps a flood on one key within the limit and mostly away from the server", async (t) => {
    const base = await start(t, "--cellserver", addr);
    await vars(base);
    const deadline = performance.now() + 3000;
    const t0 = performance.now();
    let allowed = 0;
    let total = 0;
    // Six connections, each sending its next request when the last is answered.
    await Promise.all(
      Array.from({ length: 6 }, async () => {
        while (performance.now() < deadline) {
          const res = await fetch(`${base}/hello`);
          await res.text();
          total++;
          if (res.status === 200) allowed++;
        }
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    const c = await vars(base);
    t.diagnostic(`flood: ${total} requests in ${seconds.toFixed(2)} s, ${allowed} allowed, ${c.round_trips} round trips, ${c.local} local`);
    assert.ok(allowed <= 20 + Math.ceil(10 * seconds), `${allowed} allowed in ${seconds.toFixed(2)} s`);
    assert.ok(c.round_trips * 4 <= total, `${c.round_trips} of ${total} requests reached the server`);
  });
});
