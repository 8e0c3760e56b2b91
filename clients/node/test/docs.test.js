"use strict";
// docs/http.md's Node section, replayed: its program runs as written (the
// server's address and the port put in) and limits as it says.
const { describe, it } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const Module = require("node:module");
const { performance } = require("node:perf_hooks");
const { skip, addr, rateFields } = require("./helpers");

function docsProgram() {
  const doc = fs.readFileSync(path.join(__dirname, "..", "..", "..", "docs", "http.md"), "utf8");
  const section = doc.slice(doc.indexOf("## Node: `cellserver-limit`"));
  const m = section.match(/```js\n([\s\S]*?)```/);
  assert.ok(m, "no js block in docs/http.md's Node section");
  return m[1];
}

describe("docs/http.md's Node program", { skip }, () => {
  it("answers 20 requests at once, then 429, with the fields it shows", async (t) => {
    let src = docsProgram();
    for (const [from, to] of [
      ['"127.0.0.1:6379"', JSON.stringify(addr)],
      ["app.listen(8080);", 'module.exports = { server: app.listen(0, "127.0.0.1"), client };'],
    ]) {
      assert.ok(src.includes(from), `the program no longer holds ${from}`);
      src = src.replace(from, to);
    }
    const filename = path.join(__dirname, "docs-program.js"); // resolves "cellserver-limit" and express from here
    const m = new Module(filename, module);
    m.filename = filename;
    m.paths = Module._nodeModulePaths(__dirname);
    m._compile(src, filename);
    const { server, client } = m.exports;
    t.after(() => {
      server.closeAllConnections();
      server.close();
      client.disconnect();
    });
    await new Promise((resolve) => (server.listening ? resolve() : server.once("listening", resolve)));
    await new Promise((resolve) => (client.status === "ready" ? resolve() : client.once("ready", resolve)));
    const base = `http://127.0.0.1:${server.address().port}`;
    // 20 at once, then 10 a second: requests until the first 429.
    const start = performance.now();
    let first;
    let refused;
    let allowed = 0;
    for (let i = 0; i < 200 && !refused; i++) {
      const res = await fetch(`${base}/hello`);
      const got = { status: res.status, fields: rateFields(res), body: await res.text() };
      if (i === 0) first = got;
      if (got.status === 200) allowed++;
      else refused = got;
    }
    const seconds = (performance.now() - start) / 1000;
    assert.ok(refused, `no 429 after ${allowed} requests`);
    assert.ok(allowed >= 20 && allowed <= 20 + Math.ceil(10 * seconds), `${allowed} allowed in ${seconds.toFixed(2)} s`);
    assert.equal(first.fields["RateLimit-Policy"], `"burst";q=20;w=2, "daily";q=10000;w=86400`);
    assert.match(first.fields.RateLimit, /^"burst";r=19;t=1, "daily";r=9999;t=9$/);
    assert.equal(first.fields["X-RateLimit-Limit"], "20");
    assert.equal(refused.status, 429);
    assert.equal(refused.fields["Retry-After"], "1");
    assert.deepEqual(JSON.parse(refused.body)["violated-policies"], ["burst"]);
  });
});
