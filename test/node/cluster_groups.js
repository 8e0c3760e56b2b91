// Drives a cellserver cluster of several groups with ioredis's Cluster,
// given one node's port: for each key named on the command line, three
// CL.THROTTLE key 1 2 60 (a limit of 2). Prints one line per key, the key
// and the three limited flags; test/groups_test.go compares them.
// Usage: node cluster_groups.js PORT KEY...
const Redis = require("ioredis");

async function main() {
  const [port, ...keys] = process.argv.slice(2);
  const c = new Redis.Cluster([{ host: "127.0.0.1", port: Number(port) }], {
    redisOptions: { connectTimeout: 2000 },
  });
  const out = [];
  for (const key of keys) {
    const flags = [];
    for (let i = 0; i < 3; i++) {
      flags.push((await c.call("CL.THROTTLE", key, 1, 2, 60))[0]);
    }
    out.push(`${key} ${flags.join(" ")}`);
  }
  console.log(out.join("\n"));
  c.disconnect();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
