// The conformance table (connectors/testdata/vectors.json): every case's
// verdict, through the JWKS cache as the gate uses it (Gate.verify), and
// through verifyPass alone.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { Gate, KeySet, VALID, keysFromJwks, verifyPass } from "../index.js";

const table = JSON.parse(readFileSync(new URL("../../testdata/vectors.json", import.meta.url), "utf8"));

test("the table is one this connector reads", () => {
  assert.equal(table.alg, "EdDSA");
  assert.equal(table.issuer, "usher");
  assert.equal(table.leeway_seconds, 0, "the connector has no clock-skew allowance, as Go");
  assert.equal(table.max_token_bytes, 4096);
  assert.ok(table.cases.length >= 40, `only ${table.cases.length} cases`);
});

// gateFor returns a Gate whose JWKS comes from the case: jwks at first,
// jwks_refetched on any later fetch.
function gateFor(c) {
  let fetches = 0;
  const now = Date.parse(c.now);
  const gate = new Gate({ url: "http://127.0.0.1:9", room: c.room, now: () => now, logger: null, refetchAfterMs: 0 });
  gate.keys = new KeySet({
    now: () => now,
    refetchAfterMs: 0,
    load: async () => ({ jwks: fetches++ === 0 ? c.jwks : (c.jwks_refetched ?? c.jwks), maxAgeMs: 300_000 }),
  });
  return { gate, fetches: () => fetches };
}

for (const c of table.cases) {
  test(`vector ${c.name}`, async () => {
    const { gate, fetches } = gateFor(c);
    const got = await gate.verify(c.token, c.room);
    assert.equal(got.verdict, c.verdict, `${c.name}: ${c.about ?? ""} (reason ${got.reason})`);
    if (c.verdict === VALID) {
      assert.equal(got.visitor, c.visitor);
      assert.equal(got.expiresAt.toISOString().replace(".000Z", "Z"), c.expires_at);
      assert.equal(got.room, c.room);
    }
    if (c.jwks_refetched) assert.equal(fetches(), 2, "a kid the first JWKS lacks fetches it again, once");
    else assert.equal(fetches(), 1, "a kid the JWKS holds needs no second fetch");
    const again = await gate.verify(c.token, c.room);
    assert.deepEqual(again, got, "the second time, from the cache of checked signatures");

    // verifyPass alone, with the JWKS the verifier ends with.
    const keys = keysFromJwks(c.jwks_refetched ?? c.jwks);
    assert.equal(verifyPass(c.token, c.room, (kid) => keys.get(kid), Date.parse(c.now)).verdict, c.verdict);
  });
}

test("the cache judges the clock and the room every time, and forgets a key that left", async () => {
  const c = table.cases.find((v) => v.name === "valid");
  const { gate } = gateFor(c);
  const now = Date.parse(c.now);
  assert.equal((await gate.verify(c.token, "sale", now)).verdict, VALID);
  assert.equal(gate.opened.size, 1);
  assert.equal((await gate.verify(c.token, "other", now)).verdict, "token_wrong_room");
  assert.equal((await gate.verify(c.token, "sale", Date.parse(c.expires_at))).verdict, "token_expired");
  assert.equal(gate.opened.size, 0, "an expired pass is forgotten");
  await gate.verify(c.token, "sale", now);
  gate.keys.keys = keysFromJwks({ keys: [] }); // the key retired: the set no longer holds it
  gate.keys.refetchAfterMs = Infinity;
  assert.equal((await gate.verify(c.token, "sale", now)).verdict, "token_invalid");
});

test("a kid the first JWKS lacks is invalid without the refetch", () => {
  const c = table.cases.find((v) => v.name === "rotated_key");
  const keys = keysFromJwks(c.jwks);
  const got = verifyPass(c.token, c.room, (kid) => keys.get(kid), Date.parse(c.now));
  assert.deepEqual(got, { verdict: "token_invalid", reason: "unknown kid" });
});
