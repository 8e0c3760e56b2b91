// An Express 5 service behind cellserver rate limits, to copy from: GET
// /hello is limited per client IP by two policies decided in one round
// trip ("burst": 20 at once, 10 per second; "daily": 10,000 a day),
// answered 429 with Retry-After, the RateLimit fields and the legacy
// X-RateLimit-* fields when over, and failed open (or closed, with
// --fail-closed) when cellserver does not answer within 100 ms. The
// limiter's counters are served at /debug/vars.
//
//   npm ci && node app.js --listen 127.0.0.1:8080 --cellserver 127.0.0.1:6379
//   curl -i localhost:8080/hello
"use strict";
const express = require("express");
const limit = require("cellserver-limit");

const USAGE = "usage: node app.js [--listen HOST:PORT] [--cellserver HOST:PORT] [--fail-closed] [--trusted-proxies CIDR,...] [--deny-cache DURATION] [--deny-cache-ms MS]";

// parseArgs reads --name value, --name=value and -name value.
function parseArgs(argv) {
  const opts = { listen: "127.0.0.1:8080", cellserver: "127.0.0.1:6379", "fail-closed": false, "trusted-proxies": "", "deny-cache-ms": "1000", "deny-cache": "" };
  for (let i = 0; i < argv.length; i++) {
    const m = argv[i].match(/^--?([a-z-]+)(?:=(.*))?$/);
    if (!m || !(m[1] in opts)) throw new Error(`unknown argument ${JSON.stringify(argv[i])}\n${USAGE}`);
    if (m[1] === "fail-closed") {
      opts[m[1]] = m[2] === undefined || m[2] === "true";
    } else if (m[2] !== undefined) {
      opts[m[1]] = m[2];
    } else if (i + 1 < argv.length) {
      opts[m[1]] = argv[++i];
    } else {
      throw new Error(`--${m[1]} needs a value\n${USAGE}`);
    }
  }
  return opts;
}

function splitHostPort(s, what) {
  const m = s.match(/^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/);
  if (!m) throw new Error(`--${what} ${JSON.stringify(s)}: want HOST:PORT`);
  return { host: m[1] || m[2] || "127.0.0.1", port: Number(m[3]) };
}

// connected resolves once the client is ready, has failed to connect
// (the service then starts failing open or closed), or after ms: so that
// the first requests do not wait for the connection.
function connected(client, ms) {
  return new Promise((resolve) => {
    if (client.status === "ready") return resolve();
    const done = () => {
      clearTimeout(timer);
      client.off("ready", done);
      client.off("error", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    client.once("ready", done);
    client.once("error", done);
  });
}

async function main() {
  // 1. Flags.
  const opts = parseArgs(process.argv.slice(2));
  const listen = splitHostPort(opts.listen, "listen");
  const trusted = opts["trusted-proxies"].split(",").map((s) => s.trim()).filter(Boolean);
  // --deny-cache takes what the Go and Python examples take: seconds, or
  // a number with the unit ms or s ("0" turns the cache off).
  let denyCacheMs = Number(opts["deny-cache-ms"]);
  if (opts["deny-cache"] !== "") {
    const m = opts["deny-cache"].match(/^(\d+(?:\.\d+)?)(ms|s)?$/);
    if (!m) throw new Error(`--deny-cache ${JSON.stringify(opts["deny-cache"])}: want seconds, or a number with ms or s\n${USAGE}`);
    denyCacheMs = Number(m[1]) * (m[2] === "ms" ? 1 : 1000);
  }

  // 2. The client: no offline queue, so a closed port fails at once.
  const client = limit.createClient(opts.cellserver);

  // 3. The policies and the middleware.
  const policies = [
    { name: "burst", burst: 19, count: 10, periodMs: 1000 }, // 20 at once, 10 per second
    { name: "daily", burst: 9999, count: 10000, periodMs: 24 * 3600 * 1000 }, // 10000 a day
  ];
  let lastLogged = 0;
  const limiter = limit.middleware(client, policies, limit.byIP(trusted), {
    legacy: true,
    failClosed: opts["fail-closed"],
    denyCacheMs,
    onError: (req, err) => {
      // Every request sees an error while the server is down: log the one
      // that opened the breaker, then at most one a second.
      const now = Date.now();
      if (err instanceof limit.CircuitOpenError && now - lastLogged < 1000) return;
      lastLogged = now;
      console.error(`rate limiter unavailable: ${req.method} ${req.path}: ${err.message}`);
    },
  });

  // 4. The service: /hello is limited, /debug/vars is not.
  const app = express();
  app.disable("x-powered-by");
  app.get("/debug/vars", (req, res) => {
    const c = limiter.limiter.counters();
    res.json({ limiter: { ...c, hit_rate: c.decisions ? c.local / c.decisions : 0 } });
  });
  app.get("/hello", limiter, (req, res) => {
    res.type("text/plain").send("hello\n");
  });

  // 5. Serve until SIGINT or SIGTERM, once cellserver is reached (or known down).
  await connected(client, 2000);
  const server = app.listen(listen.port, listen.host, () => {
    const a = server.address();
    const host = a.family === "IPv6" ? `[${a.address}]` : a.address;
    console.log(`listening on ${host}:${a.port}`);
  });
  server.on("error", (err) => {
    console.error(`app: ${err.message}`);
    process.exit(1);
  });
  const stop = () => {
    server.close(() => client.disconnect());
    server.closeAllConnections();
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
}

main().catch((err) => {
  console.error(`app: ${err.message}`);
  process.exit(2);
});
