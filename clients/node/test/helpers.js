"use strict";
// Shared by the tests: the server's address (CELLSERVER_ADDR, set by
// test/clients_node_test.go, which starts the real binary), fresh keys, a
// closed port and an Express app on an ephemeral port.
const net = require("node:net");
const crypto = require("node:crypto");
const limit = require("..");

const addr = process.env.CELLSERVER_ADDR || "";
/** skip is false with a server to test against, else why the test is skipped. */
const skip = addr ? false : "CELLSERVER_ADDR is not set (test/clients_node_test.go sets it)";

/** unique returns a key no other test (or run) uses. */
function unique(prefix) {
  return `${prefix}:${crypto.randomBytes(6).toString("hex")}`;
}

/**
 * client resolves to a fail-fast ioredis client of the server, connected
 * (its commands fail at once otherwise), closed after the test.
 */
async function client(t, address = addr) {
  const c = limit.createClient(address);
  t.after(() => c.disconnect());
  if (c.status !== "ready") {
    await new Promise((resolve, reject) => {
      c.once("ready", resolve);
      c.once("error", reject);
    });
  }
  return c;
}

/** closedPort returns a loopback port nothing listens on (it was free a moment ago). */
async function closedPort() {
  const s = net.createServer();
  await new Promise((resolve) => s.listen(0, "127.0.0.1", resolve));
  const { port } = s.address();
  await new Promise((resolve) => s.close(resolve));
  return port;
}

/** serve starts app (an Express app) on an ephemeral port and returns its base URL. */
async function serve(t, app) {
  const server = await new Promise((resolve, reject) => {
    const s = app.listen(0, "127.0.0.1", (err) => (err ? reject(err) : resolve(s)));
  });
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return `http://127.0.0.1:${server.address().port}`;
}

/** headers returns the rate-limit fields of a fetch Response, by their names. */
function rateFields(res) {
  const out = {};
  for (const name of ["RateLimit-Policy", "RateLimit", "Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"]) {
    const v = res.headers.get(name);
    if (v !== null) out[name] = v;
  }
  return out;
}

module.exports = { addr, skip, unique, client, closedPort, serve, rateFields };
