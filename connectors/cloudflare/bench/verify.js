// Verifications per second of the Cloudflare connector, in workerd:
//
//   node bench/verify.js [--mode verify|middleware|middleware-uncached]
//                        [--n N] [--input FILE] [--serve] [--workerd PATH]
//
// verify: verifyPass alone (WebCrypto's Ed25519). middleware: gate.handle
// on a new Request carrying the pass in Authorization, in front of a
// handler answering "ok" (no call to usher: the pass is in the first half
// of its life), the same pass each time: its signature is checked once.
// middleware-uncached: every signature checked. The passes run inside one
// workerd isolate, n per request; workerd's clock stands still during a
// request, so this script times each request from outside, and reads
// workerd's CPU time from /proc. FILE is JSON {jwks, token, room, now?};
// without it, the conformance table's "valid" case. With --serve it warms
// up, prints {"ready":true}, then answers each count read on stdin with
// the JSON line of that many passes, as the Go benchmark asks
// (go test ./cmd/usher -run '^$' -bench Connector).

import { spawn } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({
  options: {
    mode: { type: "string", default: "verify" },
    n: { type: "string" },
    input: { type: "string" },
    serve: { type: "boolean", default: false },
    workerd: { type: "string" },
  },
});
const here = fileURLToPath(new URL(".", import.meta.url));
const workerd = args.workerd ?? process.env.USHER_TEST_WORKERD ??
  join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "usher-workerd", "node_modules", "workerd", "bin", "workerd");
const input = args.input
  ? JSON.parse(readFileSync(args.input, "utf8"))
  : JSON.parse(readFileSync(join(here, "..", "..", "testdata", "vectors.json"), "utf8")).cases.find((c) => c.name === "valid");

const dir = mkdtempSync(join(tmpdir(), "usher-workerd-bench-"));
copyFileSync(join(here, "..", "fixture", "bench.js"), join(dir, "bench.js"));
copyFileSync(join(here, "..", "src", "usher.js"), join(dir, "usher.js"));
const port = await new Promise((resolve) => {
  const s = net.createServer().listen(0, "127.0.0.1", () => {
    const p = s.address().port;
    s.close(() => resolve(p));
  });
});
writeFileSync(join(dir, "config.capnp"), `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [(name = "bench", worker = (
    modules = [(name = "bench.js", esModule = embed "bench.js"), (name = "usher.js", esModule = embed "usher.js")],
    compatibilityDate = "2024-09-23",
  ))],
  sockets = [(name = "http", address = "127.0.0.1:${port}", http = (), service = "bench")],
);
`);
const proc = spawn(workerd, ["serve", join(dir, "config.capnp")], { stdio: ["ignore", "ignore", "pipe"] });
let log = ""; // workerd's errors, told when a run fails
proc.stderr.on("data", (d) => (log = (log + d).slice(-4000)));
const stop = () => {
  proc.kill();
  rmSync(dir, { recursive: true, force: true });
};
process.on("exit", stop);

// cpuNs is workerd's CPU time, user and system, in nanoseconds.
const ticks = 100; // USER_HZ on Linux
function cpuNs() {
  try {
    const f = readFileSync(`/proc/${proc.pid}/stat`, "utf8").split(") ")[1].split(" ");
    return ((Number(f[11]) + Number(f[12])) * 1e9) / ticks;
  } catch {
    return 0;
  }
}

async function run(n) {
  const res = await fetch(`http://127.0.0.1:${port}/run`, { method: "POST", body: JSON.stringify({ mode: args.mode, n, input }) });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`workerd: ${res.status} ${text}\n${log}`);
}

async function loop(n) {
  const cpu = cpuNs();
  const start = process.hrtime.bigint();
  await run(n);
  return { ns: Number(process.hrtime.bigint() - start), cpuNs: cpuNs() - cpu };
}

for (let i = 0; ; i++) {
  try {
    await run(1);
    break;
  } catch (err) {
    if (i > 100) throw new Error(`${err.message}\n${log}`);
    await sleep(100);
  }
}
const report = (n, { ns, cpuNs: c }) => JSON.stringify({
  mode: args.mode, workerd: true, n, ns_per_op: ns / n, cpu_ns_per_op: c / n, per_second: Math.round((n * 1e9) / ns),
});
for (const until = Date.now() + 300; Date.now() < until;) await loop(100);
if (args.serve) {
  console.log(JSON.stringify({ ready: true }));
  for await (const line of createInterface({ input: process.stdin })) {
    const n = Number(line);
    console.log(report(n, await loop(n)));
  }
  process.exit(0);
}
let n = args.n ? Number(args.n) : 0;
if (!n) {
  n = 1000;
  const { ns } = await loop(n);
  n = Math.max(n, Math.round((n * 1e9) / ns));
}
console.log(report(n, await loop(n)));
process.exit(0);
