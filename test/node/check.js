// Drives cellserver with ioredis (RESP2): limiter replies, key commands and
// a pipeline. Prints one line per check; test/clients_test.go compares them.
const Redis = require("ioredis");

async function main() {
  const r = new Redis({ host: "127.0.0.1", port: Number(process.argv[2]), lazyConnect: true });
  await r.connect();
  const out = [];
  out.push((await r.call("CL.THROTTLE", "node:1", 15, 30, 60)).join(" "));
  out.push((await r.call("LB.ADD", "node:2", 40, 2, "1s")).join(" "));
  out.push([await r.type("node:1"), await r.exists("node:1", "node:2", "nope"), await r.dbsize()].join(" "));
  const pipe = r.pipeline();
  for (let i = 0; i < 100; i++) pipe.call("SL.ADD", "node:sl", 10, "1h");
  const replies = await pipe.exec();
  const allowed = replies.filter(([err, rep]) => !err && rep[0] === 0).length;
  out.push(`${allowed} ${replies.length - allowed}`);
  try {
    await r.call("TB.TAKE", "node:1", 10, 1, "1s");
    out.push("no error");
  } catch (e) {
    out.push(e.message);
  }
  console.log(out.join("\n"));
  r.disconnect();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
