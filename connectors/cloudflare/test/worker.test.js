// The Cloudflare connector in workerd (npm's workerd: the Workers runtime),
// on loopback: the conformance vectors run inside workerd on its WebCrypto,
// and the worker gates a site against a live usher auth. go test
// ./cmd/usher -run TestConnectorCloudflare sets USHER_TEST_WORKERD (the
// workerd binary) and starts a usher auth built from the tree
// (USHER_TEST_URL, USHER_TEST_ADMIN_URL, USHER_TEST_ADMIN_KEY,
// USHER_TEST_CONTROL). Without them this file skips, except under CI.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";

const { USHER_TEST_WORKERD: workerd, USHER_TEST_URL: usher, USHER_TEST_ADMIN_URL: adminURL, USHER_TEST_ADMIN_KEY: adminKey, USHER_TEST_CONTROL: control } = process.env;
const missing = !workerd || !usher || !adminURL || !adminKey || !control;
if (missing && process.env.CI) {
  throw new Error("USHER_TEST_WORKERD and the USHER_TEST_* of a live usher are unset under CI: run go test ./cmd/usher -run TestConnectorCloudflare");
}
const skip = missing && "no workerd or usher: run go test ./cmd/usher -run TestConnectorCloudflare";
const here = fileURLToPath(new URL(".", import.meta.url));
const table = JSON.parse(readFileSync(join(here, "..", "..", "testdata", "vectors.json"), "utf8"));

async function freePort() {
  const s = net.createServer();
  await new Promise((resolve) => s.listen(0, "127.0.0.1", resolve));
  const { port } = s.address();
  await new Promise((resolve) => s.close(resolve));
  return port;
}

let base;
let proc;
let dir;
let log = "";

before(async () => {
  if (skip) return;
  dir = mkdtempSync(join(tmpdir(), "usher-workerd-"));
  copyFileSync(join(here, "..", "fixture", "site.js"), join(dir, "site.js"));
  copyFileSync(join(here, "..", "src", "usher.js"), join(dir, "usher.js"));
  const port = await freePort();
  writeFileSync(join(dir, "config.capnp"), `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "site", worker = (
      modules = [
        (name = "site.js", esModule = embed "site.js"),
        (name = "usher.js", esModule = embed "usher.js"),
      ],
      compatibilityDate = "2024-09-23",
      bindings = [(name = "USHER_URL", text = ${JSON.stringify(usher)})],
      globalOutbound = "net",
    )),
    (name = "net", network = (allow = ["public", "private", "local"])),
  ],
  sockets = [(name = "http", address = "127.0.0.1:${port}", http = (), service = "site")],
);
`);
  proc = spawn(workerd, ["serve", join(dir, "config.capnp"), "--verbose"], { stdio: ["ignore", "pipe", "pipe"] });
  proc.stdout.on("data", (d) => (log += d));
  proc.stderr.on("data", (d) => (log += d));
  base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    try {
      await fetch(base + "/__test/stats");
      break;
    } catch (err) {
      if (i > 100 || proc.exitCode !== null) throw new Error(`workerd did not serve: ${err.message}\n${log}`);
      await sleep(100);
    }
  }
});

after(() => {
  proc?.kill();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function post(path, body) {
  const res = await fetch(base + path, { method: "POST", body: JSON.stringify(body) });
  assert.equal(res.status, 200, `${path}: ${await res.clone().text()}\n${log}`);
  return res.json();
}

test("the conformance vectors, in workerd", { skip }, async (t) => {
  assert.ok(table.cases.length >= 40);
  for (const c of table.cases) {
    await t.test(`vector ${c.name}`, async () => {
      const { got, again, alone, fetches } = await post("/__test/vector", c);
      assert.equal(got.verdict, c.verdict, `${c.name}: ${c.about ?? ""}`);
      if (c.verdict === "valid") {
        assert.equal(got.visitor, c.visitor);
        assert.equal(got.expires_at, c.expires_at);
        assert.equal(got.room, c.room);
      }
      assert.equal(fetches, c.jwks_refetched ? 2 : 1, "a kid the first JWKS lacks fetches it again, once");
      assert.deepEqual(again, got, "the same the second time, from the cache of checked signatures");
      assert.equal(alone, c.verdict, "verifyPass alone");
    });
  }
});

// Jar keeps one client's cookies, as a browser would.
class Jar {
  constructor() {
    this.cookies = new Map();
  }
  take(res) {
    for (const c of res.headers.getSetCookie()) {
      const [pair, ...attrs] = c.split(";");
      const eq = pair.indexOf("=");
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      if (value === "" || attrs.some((a) => /^\s*max-age=(0|-)/i.test(a))) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }
  get(name) {
    return this.cookies.get(name);
  }
  header() {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
  }
}

async function visit(path, { jar, json = false, bearer, method = "GET" } = {}) {
  const h = new Headers({ Accept: json ? "application/json" : "text/html,application/xhtml+xml" });
  if (jar && jar.cookies.size > 0) h.set("Cookie", jar.header());
  if (bearer) h.set("Authorization", `Bearer ${bearer}`);
  const res = await fetch(base + path, { method, headers: h, redirect: "manual" });
  jar?.take(res);
  const body = await res.text();
  return { status: res.status, headers: res.headers, body, json: () => JSON.parse(body) };
}

async function admin(method, path, body) {
  const res = await fetch(adminURL + path, { method, headers: { Authorization: `Bearer ${adminKey}`, "Content-Type": "application/json" }, body: JSON.stringify(body) });
  assert.ok(res.ok, `${method} ${path}: ${res.status} ${await res.text()}`);
}

const stats = () => fetch(base + "/__test/stats").then((r) => r.json());
const verdict = async (token, room, nowMs) => (await post("/__test/verify", { token, room, nowMs })).verdict;
const claimsOf = (p) => JSON.parse(Buffer.from(p.split(".")[1], "base64url"));
const kidOf = (p) => JSON.parse(Buffer.from(p.split(".")[0], "base64url")).kid;
function forge(pass) {
  const [h, c, s] = pass.split(".");
  const sig = Buffer.from(s, "base64url");
  sig[10] ^= 1;
  return `${h}.${c}.${sig.toString("base64url")}`;
}
async function until(what, cond, ms = 20_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

test("the worker against a live usher", { skip }, async (t) => {
  await admin("PUT", "/api/v1/rooms/sale", { max_active: 1, interval_ms: 100, admit_rate: 100 });
  await admin("PUT", "/api/v1/rooms/brief", { active_ttl_seconds: 3, claim_window_seconds: 3 });
  const a = new Jar();
  const b = new Jar();
  const c = new Jar();
  let passA, passC, passD, passE;

  await t.test("a browser is admitted at once, then passes offline", async () => {
    const first = await visit("/shop/?seat=1", { jar: a });
    assert.equal(first.status, 303, first.body);
    assert.equal(first.headers.get("location"), "/shop/?seat=1");
    passA = a.get("usher_pass");
    assert.ok(passA);
    assert.equal(await verdict(passA, "sale"), "valid");
    const { asked } = await stats();
    const page = await visit("/shop/?seat=1", { jar: a });
    assert.equal(page.status, 200, page.body);
    assert.deepEqual(page.json(), { path: "/shop/", visitor: claimsOf(passA).sub, room: "sale" });
    assert.equal((await stats()).asked, asked, "offline: usher is not asked");
    assert.match(page.headers.get("cache-control"), /private/);
    assert.match(page.headers.get("vary"), /Cookie/);
  });

  await t.test("while the slot is taken, JSON clients get the protocol and browsers the waiting page", async () => {
    const json = await visit("/shop/items", { jar: b, json: true });
    assert.equal(json.status, 429, json.body);
    assert.ok(Number(json.headers.get("retry-after")) >= 1);
    assert.equal(json.json().state, "waiting");
    assert.equal(json.json().position, 1);
    assert.ok(b.get("usher_ticket_sale") && b.get("usher_vid"));
    const page = await visit("/shop/", { jar: c });
    assert.equal(page.status, 429);
    assert.match(page.headers.get("content-type"), /^text\/html/);
    assert.match(page.body, /id="usher-state"/);
  });

  await t.test("offline: another room, expired, forged, alg none", async () => {
    assert.equal(await verdict(passA, "brief"), "token_wrong_room");
    assert.equal(await verdict(passA, "sale", claimsOf(passA).exp * 1000), "token_expired");
    assert.equal(await verdict(forge(passA), "sale"), "token_invalid");
    const none = `${Buffer.from(JSON.stringify({ alg: "none", kid: kidOf(passA) })).toString("base64url")}.${passA.split(".")[1]}.`;
    assert.equal(await verdict(none, "sale"), "token_invalid");
    for (const bad of [forge(passA), none]) assert.equal((await visit("/shop/", { json: true, bearer: bad })).status, 429);
  });

  await t.test("renewal: past half its life, the pass is renewed through usher", async () => {
    const first = await visit("/brief/x", { json: true });
    assert.equal(first.status, 200, first.body);
    passD = first.headers.get("usher-pass");
    assert.ok(passD);
    assert.equal(first.headers.get("cache-control"), "private, no-store");
    const { iat, exp } = claimsOf(passD);
    const { asked } = await stats();
    assert.equal((await visit("/brief/x", { bearer: passD })).status, 200);
    assert.equal((await stats()).asked, asked);
    await sleep(Math.max(0, exp * 1000 - ((exp - iat) * 1000) / 2 - Date.now()) + 100);
    const renewed = await visit("/brief/x", { bearer: passD });
    assert.equal(renewed.status, 200, renewed.body);
    assert.equal((await stats()).asked, asked + 1);
    const fresh = renewed.headers.get("usher-pass");
    assert.ok(fresh && fresh !== passD);
    assert.ok(claimsOf(fresh).exp > exp);
    passD = fresh;
  });

  await t.test("an expired pass is refused: the visitor waits again", async () => {
    await admin("PUT", "/api/v1/rooms/brief", { state: "paused" });
    await sleep(Math.max(0, claimsOf(passD).exp * 1000 - Date.now()) + 100);
    assert.equal(await verdict(passD, "brief"), "token_expired");
    const r = await visit("/brief/x", { json: true, bearer: passD });
    assert.equal(r.status, 429, r.body);
    assert.equal(r.json().room_state, "paused");
  });

  await t.test("release after a purchase frees the slot for the next visitor", async () => {
    const done = await visit("/shop/checkout", { jar: a, method: "POST" });
    assert.equal(done.status, 200, done.body);
    assert.equal(done.body, "thanks");
    assert.equal(a.get("usher_pass"), undefined);
    await until("b admitted", async () => (await visit("/shop/items", { jar: b, json: true })).status === 200);
    assert.ok(b.get("usher_pass"));
  });

  await t.test("Usher-Release from the site does the same", async () => {
    const done = await visit("/shop/done", { jar: b });
    assert.equal(done.status, 200, done.body);
    assert.equal(done.headers.get("usher-release"), null);
    assert.equal(b.get("usher_pass"), undefined);
    assert.equal(done.headers.get("cache-control"), "private, no-store");
    await until("c admitted", async () => (await visit("/shop/", { jar: c })).status === 303);
    passC = c.get("usher_pass");
    assert.equal((await visit("/shop/", { jar: c })).status, 200);
  });

  await t.test("usher's own routes go to usher, its edge routes do not", async () => {
    const worker = await visit("/_usher/pow.js");
    assert.equal(worker.status, 200);
    assert.match(worker.headers.get("content-type"), /javascript/);
    const jwks = await visit("/_usher/.well-known/jwks.json", { json: true });
    assert.ok(jwks.json().keys.some((k) => k.kid === kidOf(passC)));
    for (const p of ["/_usher/auth", "/_usher/auth/release", "/_usher/%61uth", "/_usher/x/../auth"]) {
      assert.equal((await visit(p, { json: true })).status, 404, p);
    }
  });

  await t.test("key rotation: old passes still verify, new ones after one JWKS fetch", async () => {
    const res = await fetch(control + "/rotate", { method: "POST" });
    assert.equal(res.status, 204, await res.text());
    const { asked } = await stats();
    assert.equal((await visit("/shop/", { jar: c })).status, 200, "the old key's pass, offline");
    assert.equal((await stats()).asked, asked);
    const e = await visit("/shop/", { json: true });
    assert.equal(e.status, 200, e.body);
    passE = e.headers.get("usher-pass");
    assert.notEqual(kidOf(passE), kidOf(passC));
    const { fetches } = await stats();
    assert.equal((await visit("/shop/", { bearer: passE })).status, 200);
    const after = await stats();
    assert.equal(after.fetches, fetches + 1, "the unknown kid fetched the JWKS again, once");
    assert.equal(after.asked, asked + 1, "and the pass passed offline");
    assert.equal(await verdict(passC, "sale"), "valid");
  });

  await t.test("usher down: a valid pass passes, others get 503, or pass with failOpen", async () => {
    const jwksUrl = `${usher}/_usher/.well-known/jwks.json`;
    const down = { url: "http://127.0.0.1:1", jwksUrl, target: "http://shop.test/shop/" };
    const json = await post("/__test/check", { ...down, headers: { accept: "application/json" } });
    assert.equal(json.status, 503);
    assert.ok(json.headers.some(([k, v]) => k === "retry-after" && v === "5"));
    assert.equal(JSON.parse(json.body).error.code, "unavailable");
    const page = await post("/__test/check", { ...down, headers: { accept: "text/html" } });
    assert.equal(page.status, 503);
    assert.match(page.body, /High demand/);
    const passed = await post("/__test/check", { ...down, headers: { authorization: `Bearer ${passE}` } });
    assert.deepEqual(passed, { allowed: true, visitor: claimsOf(passE).sub, room: "sale" });
    const open = await post("/__test/check", { ...down, failOpen: true, headers: {} });
    assert.equal(open.allowed, true);
    assert.equal(open.visitor, undefined);
  });
});
