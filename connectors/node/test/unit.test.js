// The connector's pure parts: reading a request's pass, the renewal rule,
// the JWKS cache's timing, the headers that go to usher.

import assert from "node:assert/strict";
import { test } from "node:test";

import { KeySet, renewalDue } from "../index.js";
import { describe, passFrom, toUsher, wantsJSON } from "../lib/gate.js";
import { maxAgeMs } from "../lib/keys.js";
import { isOwn } from "../lib/node.js";

test("passFrom: the Authorization header wins, else the cookie", () => {
  const cases = [
    [undefined, undefined, ""],
    ["Bearer abc", "usher_pass=def", "abc"],
    ["bearer  abc ", undefined, "abc"],
    ["BEARER abc", undefined, "abc"],
    ["Bearer ", "usher_pass=def", "def"], // too short to be a Bearer header: the cookie
    ["Bearer  ", "usher_pass=def", ""], // a Bearer header whose pass is empty wins, as in Go
    ["Basic dXNlcg==", "usher_pass=def", "def"],
    [undefined, "a=1; usher_pass=def; b=2", "def"],
    [undefined, 'usher_pass="def"', "def"],
    [undefined, "usher_pass=first; usher_pass=second", "first"],
    [undefined, "xusher_pass=no", ""],
  ];
  for (const [authorization, cookie, want] of cases) {
    assert.equal(passFrom(authorization, cookie), want, `Authorization ${authorization}, Cookie ${cookie}`);
  }
});

test("wantsJSON: application/json listed before any text/html", () => {
  assert.equal(wantsJSON("application/json"), true);
  assert.equal(wantsJSON("application/json;q=0.9, text/html"), true);
  assert.equal(wantsJSON("text/html, application/json"), false);
  assert.equal(wantsJSON("*/*"), false);
  assert.equal(wantsJSON(undefined), false);
});

test("renewalDue: once half the pass's life, iat to exp, is used", () => {
  const pass = { issuedAt: new Date(0), expiresAt: new Date(300_000) };
  assert.equal(renewalDue(pass, 149_999), false);
  assert.equal(renewalDue(pass, 150_000), false);
  assert.equal(renewalDue(pass, 150_001), true);
  assert.equal(renewalDue({ issuedAt: null, expiresAt: new Date(300_000) }, 0), true);
});

test("maxAgeMs reads Cache-Control", () => {
  assert.equal(maxAgeMs("public, max-age=300"), 300_000);
  assert.equal(maxAgeMs("max-age=0"), 0);
  assert.equal(maxAgeMs("no-store"), null);
  assert.equal(maxAgeMs("s-maxage=10"), null);
  assert.equal(maxAgeMs(undefined), null);
});

test("toUsher: what a client sent that usher auth may read", () => {
  for (const h of ["Cookie", "Authorization", "Accept", "Accept-Language", "Usher-Wait", "Usher-Shown", "Usher-Challenge", "Usher-Bypass", "User-Agent"]) {
    assert.equal(toUsher(h), true, h);
  }
  for (const h of ["Host", "Connection", "Content-Length", "X-Forwarded-For", "X-Forwarded-Uri", "X-Original-URI", "X-Real-IP",
    "Forwarded", "Usher-Visitor", "Usher-Room", "Usher-Pass", "Usher-Release", "X_Real_IP", "Upgrade"]) {
    assert.equal(toUsher(h), false, h);
  }
});

test("describe: Node requests, Fetch requests and plain objects", () => {
  const ip = (r) => r.ip;
  const node = describe({ method: "POST", url: "/x", originalUrl: "/shop/x?a=1", rawHeaders: ["Host", "shop.test", "Usher-Wait", "10"], ip: "10.0.0.1" }, ip);
  assert.deepEqual([node.method, node.target, node.host, node.ip, node.waitMs], ["POST", "/shop/x?a=1", "shop.test", "10.0.0.1", 10_000]);
  const fetchReq = describe(new Request("https://shop.test/a/b?c=d", { headers: { Authorization: "Bearer p" } }), ip);
  assert.deepEqual([fetchReq.method, fetchReq.target, fetchReq.host, fetchReq.pass], ["GET", "/a/b?c=d", "shop.test", "p"]);
  const plain = describe({ url: "/p", headers: { host: "h", cookie: "usher_pass=q", "usher-wait": "99" } }, ip);
  assert.deepEqual([plain.target, plain.host, plain.pass, plain.waitMs], ["/p", "h", "q", 0]);
});

test("isOwn: usher's routes are /_usher and below", () => {
  assert.equal(isOwn("/_usher/pow.js"), true);
  assert.equal(isOwn("/_usher"), true);
  assert.equal(isOwn("/_usher?x"), true);
  assert.equal(isOwn("/_usherx"), false);
  assert.equal(isOwn("/shop/_usher/"), false);
});

// A JWKS cache over a loader that counts and can fail, on a settable clock.
function cache(o = {}) {
  let now = 0;
  let fail = false;
  let loads = 0;
  const keys = new KeySet({
    now: () => now,
    refetchAfterMs: 5000,
    ...o,
    load: async () => {
      loads++;
      if (fail) throw new Error("down");
      return { jwks: JWKS, maxAgeMs: 60_000 };
    },
  });
  return { keys, tick: (ms) => (now += ms), fail: (f) => (fail = f), loads: () => loads };
}

const JWKS = { keys: [{ kty: "OKP", crv: "Ed25519", x: "ExXeCW-EvMqnT6YpJEQHVVx1pX4iJO-bakJpLoq7CDE", kid: "a", alg: "EdDSA", use: "sig" }] };

test("KeySet: one fetch for concurrent callers, then the cache until max-age", async () => {
  const c = cache();
  await Promise.all([c.keys.ready(), c.keys.ready(), c.keys.ready()]);
  assert.equal(c.loads(), 1);
  assert.ok(c.keys.get("a"));
  c.tick(59_999);
  await c.keys.ready();
  assert.equal(c.loads(), 1, "fresh for the JWKS's max-age");
  c.tick(1);
  await c.keys.ready(); // stale: served at once, refreshed behind
  assert.equal(c.loads(), 2);
});

test("KeySet: the max-age is capped", async () => {
  const c = cache({ maxAgeMs: 1000 });
  await c.keys.ready();
  c.tick(1000);
  await c.keys.ready();
  assert.equal(c.loads(), 2);
});

test("KeySet: a refetch for an unknown kid at most every refetchAfterMs", async () => {
  const c = cache();
  await c.keys.ready();
  assert.equal(await c.keys.refetch(), false, "just fetched");
  c.tick(5000);
  assert.equal(await c.keys.refetch(), true);
  assert.equal(await c.keys.refetch(), false);
  assert.equal(c.loads(), 2);
});

test("KeySet: a failed fetch keeps the set held, and a first failure rejects", async () => {
  const c = cache();
  c.fail(true);
  await assert.rejects(c.keys.ready(), /down/);
  c.fail(false);
  c.tick(5000);
  await c.keys.ready();
  c.fail(true);
  c.tick(5000);
  assert.equal(await c.keys.refetch(), false);
  assert.ok(c.keys.get("a"), "the old set is kept");
  assert.match(c.keys.lastError.message, /down/);
});

test("KeySet: a JWKS without an Ed25519 key is refused", async () => {
  const keys = new KeySet({ load: async () => ({ jwks: { keys: [{ kty: "RSA", kid: "r", n: "x", e: "AQAB" }] } }) });
  await assert.rejects(keys.ready(), /no Ed25519 key/);
});

test("KeySet: without any set, a failure is the answer for a second", async () => {
  const c = cache();
  c.fail(true);
  await assert.rejects(c.keys.ready(), /down/);
  await assert.rejects(c.keys.ready(), /down/);
  assert.equal(c.loads(), 1, "not asked again within the second");
  c.tick(1000);
  c.fail(false);
  await c.keys.ready();
  assert.equal(c.loads(), 2);
});
