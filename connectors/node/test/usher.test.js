// The connector against a live usher auth, in front of a Node site: go
// test ./cmd/usher -run TestConnectorNode starts one built from the tree
// and sets USHER_TEST_URL (usher auth), USHER_TEST_ADMIN_URL and
// USHER_TEST_ADMIN_KEY (its admin listener) and USHER_TEST_CONTROL (POST
// /rotate: a new signing key, usher auth restarted). Without them this
// file skips, except under CI, where it fails.

import assert from "node:assert/strict";
import http from "node:http";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import { INVALID, EXPIRED, VALID, WRONG_ROOM, createGate } from "../index.js";
import { claimsOf } from "../lib/pass.js";

const { USHER_TEST_URL: usher, USHER_TEST_ADMIN_URL: adminURL, USHER_TEST_ADMIN_KEY: adminKey, USHER_TEST_CONTROL: control } = process.env;
const missing = !usher || !adminURL || !adminKey || !control;
if (missing && process.env.CI) {
  throw new Error("USHER_TEST_URL, USHER_TEST_ADMIN_URL, USHER_TEST_ADMIN_KEY and USHER_TEST_CONTROL are unset under CI: run go test ./cmd/usher -run TestConnectorNode");
}

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
      const expired = attrs.some((a) => /^\s*max-age=(0|-)/i.test(a) ||
        (/^\s*expires=/i.test(a) && Date.parse(a.split("=")[1]) <= Date.now()));
      if (value === "" || expired) this.cookies.delete(name);
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

// visit asks the site for path as one client: its jar, its Accept, its
// Bearer token if any. Redirects are not followed.
async function visit(base, path, { jar, json = false, bearer, method = "GET", headers = {} } = {}) {
  const h = new Headers(headers);
  h.set("Accept", json ? "application/json" : "text/html,application/xhtml+xml");
  if (jar && jar.cookies.size > 0) h.set("Cookie", jar.header());
  if (bearer) h.set("Authorization", `Bearer ${bearer}`);
  const res = await fetch(base + path, { method, headers: h, redirect: "manual" });
  jar?.take(res);
  const body = await res.text();
  return { status: res.status, headers: res.headers, body, json: () => JSON.parse(body) };
}

async function admin(method, path, body) {
  const res = await fetch(adminURL + path, {
    method,
    headers: { Authorization: `Bearer ${adminKey}`, "Content-Type": "application/json" },
    body: body && JSON.stringify(body),
  });
  assert.ok(res.ok, `${method} ${path}: ${res.status} ${await res.text()}`);
}

// site serves a Node app behind the connector's Connect middleware.
async function site(gate) {
  const hits = [];
  const app = async (req, res) => {
    hits.push(req.url);
    const path = req.url.split("?")[0];
    if (path === "/shop/checkout") {
      await gate.release(req, res);
      res.end("thanks");
      return;
    }
    if (path === "/shop/done") res.setHeader("Usher-Release", "1"); // as behind usher proxy
    res.setHeader("Content-Type", "application/json");
    res.end(JSON.stringify({ path, visitor: req.usher?.visitor, room: req.usher?.room, header: req.headers["usher-visitor"] }));
  };
  const mw = gate.middleware();
  const server = http.createServer((req, res) => {
    mw(req, res, (err) => {
      if (err) {
        res.statusCode = 500;
        res.end(String(err.stack));
        return;
      }
      app(req, res).catch((e) => {
        res.statusCode = 500;
        res.end(String(e.stack));
      });
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { base: `http://127.0.0.1:${server.address().port}`, hits, close: () => server.close() };
}

const kidOf = (pass) => JSON.parse(Buffer.from(pass.split(".")[0], "base64url")).kid;

// forge flips one bit in the middle of a token's signature.
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

test("the connector against a live usher", { skip: missing && "no usher: run go test ./cmd/usher -run TestConnectorNode" }, async (t) => {
  const gate = createGate({
    url: usher,
    room: (req) => ((req.originalUrl ?? req.url).startsWith("/brief/") ? "brief" : "sale"),
    refetchAfterMs: 0,
    logger: null,
  });
  const s = await site(gate);
  t.after(() => s.close());
  // One visitor at a time in sale, admitted within 100 ms of a free slot;
  // brief's slots last 3 s.
  await admin("PUT", "/api/v1/rooms/sale", { max_active: 1, interval_ms: 100, admit_rate: 100 });
  await admin("PUT", "/api/v1/rooms/brief", { active_ttl_seconds: 3, claim_window_seconds: 3 });

  const a = new Jar();
  const b = new Jar();
  const c = new Jar();
  let passA;

  await t.test("a browser is admitted at once, then passes offline", async () => {
    const first = await visit(s.base, "/shop/?seat=1", { jar: a });
    assert.equal(first.status, 303, first.body);
    assert.equal(first.headers.get("location"), "/shop/?seat=1");
    passA = a.get("usher_pass");
    assert.ok(passA, "the pass cookie, on the site's own domain");
    assert.equal((await gate.verify(passA, "sale")).verdict, VALID);
    const asked = gate.stats.asked;
    const page = await visit(s.base, "/shop/?seat=1", { jar: a });
    assert.equal(page.status, 200, page.body);
    assert.deepEqual(page.json(), { path: "/shop/", visitor: claimsOf(passA).sub, room: "sale", header: claimsOf(passA).sub });
    assert.equal(gate.stats.asked, asked, "a pass in the first half of its life is checked offline: usher is not asked");
    assert.match(page.headers.get("cache-control"), /private/);
    assert.match(page.headers.get("vary"), /Cookie/);
  });

  await t.test("while the slot is taken, JSON clients get the protocol and browsers the waiting page", async () => {
    const hits = s.hits.length;
    const json = await visit(s.base, "/shop/items", { jar: b, json: true });
    assert.equal(json.status, 429, json.body);
    assert.ok(Number(json.headers.get("retry-after")) >= 1);
    const entry = json.json();
    assert.equal(entry.state, "waiting");
    assert.equal(entry.position, 1);
    assert.ok(entry.ticket && b.get("usher_ticket_sale") && b.get("usher_vid"), "the ticket, in the body and the cookie");
    const page = await visit(s.base, "/shop/", { jar: c });
    assert.equal(page.status, 429);
    assert.match(page.headers.get("content-type"), /^text\/html/);
    assert.match(page.body, /id="usher-state"/);
    assert.match(page.headers.get("cache-control"), /no-store/);
    assert.equal(s.hits.length, hits, "the site saw none of them");
  });

  await t.test("offline: another room, expired, forged, alg none", async () => {
    const exp = claimsOf(passA).exp;
    assert.equal((await gate.verify(passA, "brief")).verdict, WRONG_ROOM);
    assert.equal((await gate.verify(passA, "sale", exp * 1000)).verdict, EXPIRED);
    assert.equal((await gate.verify(forge(passA), "sale")).verdict, INVALID);
    const [, claims] = passA.split(".");
    const none = `${Buffer.from(JSON.stringify({ alg: "none", kid: kidOf(passA) })).toString("base64url")}.${claims}.`;
    assert.equal((await gate.verify(none, "sale")).verdict, INVALID);
    const hits = s.hits.length;
    for (const bad of [forge(passA), none]) {
      const r = await visit(s.base, "/shop/", { json: true, bearer: bad });
      assert.equal(r.status, 429, `a forged pass waits like anyone: ${r.body}`);
    }
    assert.equal(s.hits.length, hits, "the site saw none of them");
  });

  let passD;
  await t.test("renewal: past half its life, the pass is renewed through usher", async () => {
    const first = await visit(s.base, "/brief/x", { json: true });
    assert.equal(first.status, 200, `a JSON client admitted at once is served at once: ${first.body}`);
    passD = first.headers.get("usher-pass");
    assert.ok(passD);
    assert.ok(Number(first.headers.get("usher-pass-ttl")) <= 3);
    assert.equal(first.headers.get("cache-control"), "private, no-store");
    const { iat, exp } = claimsOf(passD);
    const asked = gate.stats.asked;
    assert.equal((await visit(s.base, "/brief/x", { bearer: passD })).status, 200);
    assert.equal(gate.stats.asked, asked);
    await sleep(Math.max(0, exp * 1000 - ((exp - iat) * 1000) / 2 - Date.now()) + 100);
    const renewed = await visit(s.base, "/brief/x", { bearer: passD });
    assert.equal(renewed.status, 200, renewed.body);
    assert.equal(gate.stats.asked, asked + 1);
    const fresh = renewed.headers.get("usher-pass");
    assert.ok(fresh && fresh !== passD, "a new pass in Usher-Pass");
    assert.ok(claimsOf(fresh).exp > exp, "that lasts longer");
    assert.equal(renewed.headers.get("cache-control"), "private, no-store");
    passD = fresh;
  });

  await t.test("an expired pass is refused: the visitor waits again", async () => {
    await admin("PUT", "/api/v1/rooms/brief", { state: "paused" });
    await sleep(Math.max(0, claimsOf(passD).exp * 1000 - Date.now()) + 100);
    assert.equal((await gate.verify(passD, "brief")).verdict, EXPIRED);
    const hits = s.hits.length;
    const r = await visit(s.base, "/brief/x", { json: true, bearer: passD });
    assert.equal(r.status, 429, r.body);
    assert.equal(r.json().room_state, "paused");
    assert.equal(s.hits.length, hits);
  });

  await t.test("release after a purchase frees the slot for the next visitor", async () => {
    const done = await visit(s.base, "/shop/checkout", { jar: a, method: "POST" });
    assert.equal(done.status, 200, done.body);
    assert.equal(done.body, "thanks");
    assert.equal(a.get("usher_pass"), undefined, "the pass cookie is cleared");
    assert.equal(done.headers.get("cache-control"), "private, no-store");
    const admitted = await until("b admitted", async () => {
      const r = await visit(s.base, "/shop/items", { jar: b, json: true });
      return r.status === 200 && r;
    });
    assert.ok(admitted.headers.get("usher-pass"));
    assert.ok(b.get("usher_pass"));
  });

  let passC;
  await t.test("Usher-Release from the site does the same", async () => {
    const done = await visit(s.base, "/shop/done", { jar: b });
    assert.equal(done.status, 200, done.body);
    assert.equal(done.headers.get("usher-release"), null, "the header stays between site and connector");
    assert.equal(b.get("usher_pass"), undefined);
    await until("c admitted", async () => (await visit(s.base, "/shop/", { jar: c })).status === 303);
    passC = c.get("usher_pass");
    assert.equal((await visit(s.base, "/shop/", { jar: c })).status, 200);
  });

  await t.test("usher's own routes go to usher, its edge routes do not", async () => {
    const worker = await visit(s.base, "/_usher/pow.js");
    assert.equal(worker.status, 200);
    assert.match(worker.headers.get("content-type"), /javascript/);
    const jwks = await visit(s.base, "/_usher/.well-known/jwks.json", { json: true });
    assert.equal(jwks.status, 200);
    assert.ok(jwks.json().keys.some((k) => k.kid === kidOf(passC)));
    for (const p of ["/_usher/auth", "/_usher/auth/release", "/_usher/%61uth", "/_usher/x/../auth"]) {
      assert.equal((await visit(s.base, p, { json: true })).status, 404, p);
    }
  });

  let passE;
  await t.test("key rotation: old passes still verify, new ones after one JWKS fetch", async () => {
    const res = await fetch(control + "/rotate", { method: "POST" });
    assert.equal(res.status, 204, await res.text());
    const asked = gate.stats.asked;
    assert.equal((await visit(s.base, "/shop/", { jar: c })).status, 200, "the old key's pass, offline");
    assert.equal(gate.stats.asked, asked);

    const e = await visit(s.base, "/shop/", { json: true }); // usher restarted: its slots are gone
    assert.equal(e.status, 200, e.body);
    passE = e.headers.get("usher-pass");
    assert.notEqual(kidOf(passE), kidOf(passC), "signed by the new key");
    const fetches = gate.keys.fetches;
    const again = await visit(s.base, "/shop/", { bearer: passE });
    assert.equal(again.status, 200, again.body);
    assert.equal(gate.keys.fetches, fetches + 1, "the unknown kid fetched the JWKS again, once");
    assert.equal(gate.stats.asked, asked + 1, "and the pass passed offline");
    assert.equal((await gate.verify(passC, "sale")).verdict, VALID, "the old key is still in the JWKS");
  });

  await t.test("the plain function takes a Fetch API Request", async () => {
    const d = await gate.check(new Request(`${s.base}/shop/`, { headers: { Authorization: `Bearer ${passE}` } }));
    assert.equal(d.allowed, true);
    assert.equal(d.visitor, claimsOf(passE).sub);
    assert.equal(d.room, "sale");
  });

  await t.test("usher down: a valid pass passes, others get 503, or pass with failOpen", async () => {
    const jwksUrl = `${usher}/_usher/.well-known/jwks.json`;
    const down = createGate({ url: "http://127.0.0.1:1", jwksUrl, room: "sale", logger: null });
    const json = await down.check({ url: "/shop/", headers: { accept: "application/json" } });
    assert.equal(json.status, 503);
    assert.equal(json.headers.find(([k]) => k === "Retry-After")[1], "5");
    assert.equal(JSON.parse(json.body).error.code, "unavailable");
    const page = await down.check({ url: "/shop/", headers: { accept: "text/html" } });
    assert.equal(page.status, 503);
    assert.match(page.body.toString(), /High demand/);
    const passed = await down.check({ url: "/shop/", headers: { authorization: `Bearer ${passE}` } });
    assert.equal(passed.allowed, true);
    assert.equal(passed.visitor, claimsOf(passE).sub);
    const open = createGate({ url: "http://127.0.0.1:1", jwksUrl, room: "sale", logger: null, failOpen: true });
    const d = await open.check({ url: "/shop/", headers: {} });
    assert.deepEqual([d.allowed, d.visitor], [true, undefined]);
  });
});
