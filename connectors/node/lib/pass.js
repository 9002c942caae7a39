// Offline verification of usher passes: EdDSA (Ed25519) JWS checked by the
// rules of usher's internal/token ParsePass, which the Go gate runs. No
// clock-skew allowance, as in Go. Pure: no I/O, no clock of its own.

import { createPublicKey, verify as verifySignature } from "node:crypto";

/** The verdicts: "valid", or the API's error code for the pass. */
export const VALID = "valid";
export const INVALID = "token_invalid";
export const EXPIRED = "token_expired";
export const WRONG_ROOM = "token_wrong_room";

/** The longest pass accepted, in bytes (a browser keeps cookies up to 4096). */
export const MAX_TOKEN_BYTES = 4096;

/** Why a pass is invalid when its kid is not among the keys: fetch them again. */
export const UNKNOWN_KID = "unknown kid";

const ISSUER = "usher";
const ALG = "EdDSA";
const SEGMENT = /^[A-Za-z0-9_-]*$/;
const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/**
 * decode reads strict base64url without padding: the one canonical spelling
 * of the bytes (no "=", no "+" or "/", the last character's unused bits
 * zero), as Go's base64.RawURLEncoding.Strict(). null when it is not.
 */
export function decode(segment) {
  if (!SEGMENT.test(segment)) return null;
  const rest = segment.length % 4;
  if (rest === 1) return null;
  if (rest !== 0) {
    const last = ALPHABET.indexOf(segment[segment.length - 1]);
    if ((last & (rest === 2 ? 0x0f : 0x03)) !== 0) return null;
  }
  return Buffer.from(segment, "base64url");
}

function parseObject(bytes) {
  if (bytes === null) return null;
  try {
    const v = JSON.parse(bytes.toString("utf8"));
    return v !== null && typeof v === "object" && !Array.isArray(v) ? v : null;
  } catch {
    return null;
  }
}

/**
 * keysFromJwks returns the Ed25519 verification keys of a JSON Web Key Set
 * as a Map from kid to KeyObject. Keys of another type, curve, algorithm or
 * use are left out, and so is a kid seen before.
 */
export function keysFromJwks(jwks) {
  const keys = new Map();
  for (const k of Array.isArray(jwks?.keys) ? jwks.keys : []) {
    if (k === null || typeof k !== "object" || typeof k.kid !== "string" || keys.has(k.kid)) continue;
    if (k.kty !== "OKP" || k.crv !== "Ed25519" || typeof k.x !== "string") continue;
    if ((k.alg !== undefined && k.alg !== ALG) || (k.use !== undefined && k.use !== "sig")) continue;
    const x = decode(k.x);
    if (x === null || x.length !== 32) continue;
    try {
      keys.set(k.kid, createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: k.x }, format: "jwk" }));
    } catch {
      // not a point on the curve: left out
    }
  }
  return keys;
}

const invalid = (reason) => ({ verdict: INVALID, reason });

// A NumericDate: a number of seconds, truncated to whole seconds as Go's
// jwt.NumericDate keeps it; undefined when absent or null, NaN when not a
// number.
function seconds(v) {
  if (v === undefined || v === null) return undefined;
  return typeof v === "number" && Number.isFinite(v) ? Math.floor(v) : NaN;
}

/**
 * verifyPass checks token as a pass for room at nowMs (milliseconds since
 * the epoch), with keyFor(kid) giving the KeyObject of a kid (undefined if
 * unknown). It returns {verdict: "valid", visitor, room, expiresAt, issuedAt}
 * (Dates; issuedAt null without iat) or {verdict, reason} with verdict one
 * of token_invalid, token_expired, token_wrong_room. A bad signature or a
 * malformed token is invalid whatever else is wrong; then a wrong room wins
 * over an expiry. reason is UNKNOWN_KID when only the key was missing.
 */
export function verifyPass(token, room, keyFor, nowMs) {
  const opened = openPass(token, keyFor);
  return opened.verdict === undefined ? judgePass(opened, room, nowMs) : opened;
}

/**
 * openPass does what verifyPass does before the clock and the room count:
 * decoding and the signature, the costly part. It returns {verdict, reason}
 * for a token that is invalid whatever the room and time, or the signed
 * claims {kid, key, iss, sub, auds, exp, nbf, iat} for judgePass, which a
 * cache may keep while keyFor(kid) still gives key.
 */
export function openPass(token, keyFor) {
  if (typeof token !== "string" || token.length > MAX_TOKEN_BYTES) return invalid("malformed");
  const first = token.indexOf(".");
  const second = token.indexOf(".", first + 1);
  if (first < 0 || second < 0 || token.indexOf(".", second + 1) >= 0) return invalid("malformed");
  const header = parseObject(decode(token.slice(0, first)));
  const claims = parseObject(decode(token.slice(first + 1, second)));
  const signature = decode(token.slice(second + 1));
  if (header === null || claims === null || signature === null) return invalid("malformed");
  if (header.alg !== ALG) return invalid("alg");

  // Claim types, as Go's decoder checks them before anything else.
  const { iss, sub, aud, jti } = claims;
  const exp = seconds(claims.exp);
  const nbf = seconds(claims.nbf);
  const iat = seconds(claims.iat);
  const auds = typeof aud === "string" ? [aud] : aud ?? [];
  if (
    (iss !== undefined && iss !== null && typeof iss !== "string") ||
    (sub !== undefined && sub !== null && typeof sub !== "string") ||
    (jti !== undefined && jti !== null && typeof jti !== "string") ||
    !Array.isArray(auds) || !auds.every((a) => typeof a === "string") ||
    Number.isNaN(exp) || Number.isNaN(nbf) || Number.isNaN(iat)
  ) {
    return invalid("malformed");
  }

  if (typeof header.kid !== "string") return invalid("kid");
  const key = keyFor(header.kid);
  if (key === undefined) return invalid(UNKNOWN_KID);
  let ok = false;
  if (signature.length === 64) {
    try {
      ok = verifySignature(null, Buffer.from(token.slice(0, second), "latin1"), key, signature);
    } catch {
      ok = false;
    }
  }
  if (!ok) return invalid("signature");
  return { kid: header.kid, key, iss, sub, auds, exp, nbf, iat };
}

/** judgePass gives the verdict on claims openPass returned, for room at nowMs. */
export function judgePass(c, room, nowMs) {
  if (c.exp === undefined || (c.nbf !== undefined && nowMs < c.nbf * 1000)) return invalid("claims");
  if (c.iss !== ISSUER || typeof c.sub !== "string" || c.sub === "") return invalid("claims");
  if (c.auds.length === 0 || (c.auds.length === 1 && c.auds[0] === "")) return invalid("claims");
  if (!c.auds.includes(room)) return { verdict: WRONG_ROOM };
  if (!(nowMs < c.exp * 1000)) return { verdict: EXPIRED };
  return {
    verdict: VALID,
    visitor: c.sub,
    room,
    expiresAt: new Date(c.exp * 1000),
    issuedAt: c.iat === undefined ? null : new Date(c.iat * 1000),
  };
}

/**
 * renewalDue reports whether a valid pass has used half its life at nowMs,
 * measured from iat to exp: usher is then asked for a fresh one. A pass
 * without iat is always due (usher decides).
 */
export function renewalDue(pass, nowMs) {
  if (pass.issuedAt === null) return true;
  const exp = pass.expiresAt.getTime();
  return exp - nowMs < (exp - pass.issuedAt.getTime()) / 2;
}

/**
 * claimsOf returns the claims of a token without verifying anything (null
 * if it has none): for a pass usher itself just handed over.
 */
export function claimsOf(token) {
  const parts = typeof token === "string" ? token.split(".") : [];
  return parts.length === 3 ? parseObject(decode(parts[1])) : null;
}
