// Verifications per second of the Node connector, on one core:
//
//   node bench/verify.js [--mode verify|middleware|middleware-uncached]
//                        [--n N] [--input FILE] [--serve]
//
// verify: verifyPass alone, on a pass and its key. middleware: gate.handle
// on a Node request carrying the pass in Authorization, as Express's
// middleware runs it (new IncomingMessage and ServerResponse each time, no
// socket, no call to usher: the pass is in the first half of its life),
// the same pass each time, as a visitor's page views bring it: its
// signature is checked once. middleware-uncached: the same with every
// signature checked (cacheSize 0).
// FILE is JSON {jwks, token, room, now?} (now: RFC 3339; default the
// clock); without it, the conformance table's "valid" case. Without --n it
// runs for about a second. It prints one JSON line. With --serve it warms
// up, prints {"ready": true}, then reads a count per line on stdin and
// answers each with the JSON line of that many passes: how the Go
// benchmark runs it beside Go's own (go test ./cmd/usher -run '^$' -bench
// Connector), so that its b.N loop times passes, not Node's start.

import http from "node:http";
import net from "node:net";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";

import { KeySet, VALID, createGate, keysFromJwks, verifyPass } from "../index.js";

const { values: args } = parseArgs({
  options: {
    mode: { type: "string", default: "verify" },
    n: { type: "string" },
    input: { type: "string" },
    serve: { type: "boolean", default: false },
  },
});

function input() {
  if (args.input) return JSON.parse(readFileSync(args.input, "utf8"));
  const table = JSON.parse(readFileSync(new URL("../../testdata/vectors.json", import.meta.url), "utf8"));
  return table.cases.find((c) => c.name === "valid");
}

const { jwks, token, room, now: at } = input();
const now = at ? () => Date.parse(at) : Date.now;

let once;
if (args.mode === "verify") {
  const keys = keysFromJwks(jwks);
  const keyFor = (kid) => keys.get(kid);
  once = () => {
    if (verifyPass(token, room, keyFor, now()).verdict !== VALID) throw new Error("the pass does not verify");
  };
} else if (args.mode === "middleware" || args.mode === "middleware-uncached") {
  const cacheSize = args.mode === "middleware" ? undefined : 0;
  const gate = createGate({ url: "http://127.0.0.1:9", room, now, logger: null, cacheSize });
  gate.keys = new KeySet({ now, load: async () => ({ jwks }) });
  const socket = new net.Socket();
  const authorization = `Bearer ${token}`;
  once = async () => {
    const req = new http.IncomingMessage(socket);
    req.method = "GET";
    req.url = "/shop/";
    req.headers = { host: "shop.test", authorization };
    req.rawHeaders = ["Host", "shop.test", "Authorization", authorization];
    const res = new http.ServerResponse(req);
    if (!(await gate.handle(req, res)) || req.usher.visitor === undefined) throw new Error("the request did not pass offline");
  };
} else {
  throw new Error(`--mode ${args.mode}: want verify, middleware or middleware-uncached`);
}

// loop runs n passes and returns the time they took and the CPU time the
// process spent on them, in nanoseconds: on a busy machine the second
// varies less.
async function loop(n) {
  const cpu = process.cpuUsage();
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await once();
  const ns = Number(process.hrtime.bigint() - start);
  const { user, system } = process.cpuUsage(cpu);
  return { ns, cpuNs: (user + system) * 1000 };
}

const report = (n, { ns, cpuNs }) => JSON.stringify({
  mode: args.mode,
  node: process.version,
  n,
  ns_per_op: ns / n,
  cpu_ns_per_op: cpuNs / n,
  per_second: Math.round((n * 1e9) / ns),
});

// Warm the JIT for 300 ms.
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
  // About a second: calibrated on a tenth.
  n = 1000;
  const { ns } = await loop(n);
  n = Math.max(n, Math.round((n * 1e9) / ns));
}
console.log(report(n, await loop(n)));
