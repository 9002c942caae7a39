// usher connector for Cloudflare Workers (and workerd): checks usher's
// passes at the edge, offline, with WebCrypto's Ed25519, and asks usher
// auth only for a request without a valid pass or with one due for
// renewal. connectors/README.md states the protocol; this file is the
// whole connector, with no dependency.
//
//   import { withUsher } from "./usher.js";
//   export default withUsher((env) => ({ url: env.USHER_URL, room: "sale" }), {
//     fetch: (request, env, ctx) => fetch(request), // the origin
//   });

export const VALID = "valid";
export const INVALID = "token_invalid";
export const EXPIRED = "token_expired";
export const WRONG_ROOM = "token_wrong_room";
export const MAX_TOKEN_BYTES = 4096;
export const UNKNOWN_KID = "unknown kid";

export const PASS_COOKIE = "usher_pass";
export const PASS_HEADER = "Usher-Pass";
export const PASS_TTL_HEADER = "Usher-Pass-TTL";
export const VISITOR_HEADER = "Usher-Visitor";
export const ROOM_HEADER = "Usher-Room";
export const RELEASE_HEADER = "Usher-Release";
export const CREDENTIAL_CACHE = "private, no-store";

const ISSUER = "usher";
const ALG = "EdDSA";
const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const AUTH_PATH = "/_usher/auth";
const RELEASE_PATH = "/_usher/auth/release";
const JWKS_PATH = "/_usher/.well-known/jwks.json";
const DEFAULT_MAX_AGE_MS = 300_000;
const UNAVAILABLE_RETRY = 5;
const UNAVAILABLE_JSON = JSON.stringify({ error: { code: "unavailable", message: "a backend is unavailable; retry later" } });
const UNAVAILABLE_HTML =
  "<!doctype html><html lang='en'><head><meta charset='utf-8'>" +
  "<meta name='viewport' content='width=device-width, initial-scale=1'>" +
  `<meta http-equiv='refresh' content='${UNAVAILABLE_RETRY}'>` +
  "<title>High demand</title></head>" +
  "<body style='font-family:system-ui,sans-serif;max-width:34rem;margin:4rem auto;padding:0 1rem;line-height:1.5'>" +
  "<h1>High demand</h1>" +
  "<p>So many people are visiting right now that we cannot let you in yet." +
  ` This page tries again by itself every ${UNAVAILABLE_RETRY} seconds.</p>` +
  "</body></html>";
const NOT_FOUND_JSON = JSON.stringify({ error: { code: "not_found", message: "no such route" } });
const NOT_TO_USHER = new Set([
  "host", "connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "trailer",
  "transfer-encoding", "upgrade", "http2-settings", "expect", "content-length", "content-type",
  "forwarded", "x-real-ip", "true-client-ip", "x-client-ip", "cf-connecting-ip", "fastly-client-ip",
  "x-cluster-client-ip", "x-proxyuser-ip", "usher-visitor", "usher-room", "usher-pass", "usher-pass-ttl",
  "usher-release",
]);
const NOT_FROM_USHER = new Set(["connection", "keep-alive", "transfer-encoding", "content-length", "date", "server", "trailer", "upgrade"]);

/** decode reads strict base64url without padding (Go's RawURLEncoding.Strict()); null when it is not. */
export function decode(segment) {
  if (!/^[A-Za-z0-9_-]*$/.test(segment)) return null;
  const rest = segment.length % 4;
  if (rest === 1) return null;
  if (rest !== 0) {
    const last = ALPHABET.indexOf(segment[segment.length - 1]);
    if ((last & (rest === 2 ? 0x0f : 0x03)) !== 0) return null;
  }
  const bin = atob(segment.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((segment.length + 3) % 4));
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function parseObject(bytes) {
  if (bytes === null) return null;
  try {
    const v = JSON.parse(new TextDecoder().decode(bytes));
    return v !== null && typeof v === "object" && !Array.isArray(v) ? v : null;
  } catch {
    return null;
  }
}

/** keysFromJwks imports the Ed25519 keys of a JWKS: a Map from kid to CryptoKey. */
export async function keysFromJwks(jwks) {
  const keys = new Map();
  for (const k of Array.isArray(jwks?.keys) ? jwks.keys : []) {
    if (k === null || typeof k !== "object" || typeof k.kid !== "string" || keys.has(k.kid)) continue;
    if (k.kty !== "OKP" || k.crv !== "Ed25519" || typeof k.x !== "string") continue;
    if ((k.alg !== undefined && k.alg !== ALG) || (k.use !== undefined && k.use !== "sig")) continue;
    const x = decode(k.x);
    if (x === null || x.length !== 32) continue;
    try {
      keys.set(k.kid, await crypto.subtle.importKey("raw", x, { name: "Ed25519" }, false, ["verify"]));
    } catch {
      // not a key WebCrypto takes: left out
    }
  }
  return keys;
}

const invalid = (reason) => ({ verdict: INVALID, reason });

function seconds(v) {
  if (v === undefined || v === null) return undefined;
  return typeof v === "number" && Number.isFinite(v) ? Math.floor(v) : NaN;
}

/** openPass decodes a token and checks its signature: {verdict, reason}, or the signed claims. */
export async function openPass(token, keyFor) {
  if (typeof token !== "string" || token.length > MAX_TOKEN_BYTES) return invalid("malformed");
  const first = token.indexOf(".");
  const second = token.indexOf(".", first + 1);
  if (first < 0 || second < 0 || token.indexOf(".", second + 1) >= 0) return invalid("malformed");
  const header = parseObject(decode(token.slice(0, first)));
  const claims = parseObject(decode(token.slice(first + 1, second)));
  const signature = decode(token.slice(second + 1));
  if (header === null || claims === null || signature === null) return invalid("malformed");
  if (header.alg !== ALG) return invalid("alg");
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
    const data = new Uint8Array(second);
    for (let i = 0; i < second; i++) data[i] = token.charCodeAt(i);
    try {
      ok = await crypto.subtle.verify({ name: "Ed25519" }, key, signature, data);
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
  return { verdict: VALID, visitor: c.sub, room, expiresAt: new Date(c.exp * 1000), issuedAt: c.iat === undefined ? null : new Date(c.iat * 1000) };
}

/** verifyPass checks token as a pass for room at nowMs (openPass, then judgePass). */
export async function verifyPass(token, room, keyFor, nowMs) {
  const opened = await openPass(token, keyFor);
  return opened.verdict === undefined ? judgePass(opened, room, nowMs) : opened;
}

/** renewalDue reports whether a valid pass has used half its life at nowMs. */
export function renewalDue(pass, nowMs) {
  if (pass.issuedAt === null) return true;
  const exp = pass.expiresAt.getTime();
  return exp - nowMs < (exp - pass.issuedAt.getTime()) / 2;
}

/** claimsOf returns a token's claims without verifying anything (null if none). */
export function claimsOf(token) {
  const parts = typeof token === "string" ? token.split(".") : [];
  return parts.length === 3 ? parseObject(decode(parts[1])) : null;
}

/** maxAgeMs reads Cache-Control's max-age, in milliseconds (null if none). */
export function maxAgeMs(cacheControl) {
  const m = /(?:^|,)\s*max-age\s*=\s*"?(\d+)"?\s*(?:,|$)/i.exec(cacheControl ?? "");
  return m ? Number(m[1]) * 1000 : null;
}

/**
 * KeySet is the JWKS cache of an isolate: fetched once, kept for its
 * max-age, fetched again when stale (the stale set is kept if that fails)
 * or when a pass names an unknown kid (at most every refetchAfterMs), one
 * fetch at a time.
 */
export class KeySet {
  constructor({ load, now = Date.now, refetchAfterMs = 5000, maxAgeMs: cap = DEFAULT_MAX_AGE_MS }) {
    this.load = load;
    this.now = now;
    this.refetchAfterMs = refetchAfterMs;
    this.cap = cap;
    this.keys = null;
    this.freshUntil = 0;
    this.fetchedAt = -Infinity;
    this.inflight = null;
    this.fetches = 0;
    this.lastError = null;
  }

  get(kid) {
    return this.keys?.get(kid);
  }

  async ready() {
    if (this.keys === null) {
      if (this.inflight === null && this.lastError !== null && this.now() - this.fetchedAt < 1000) throw this.lastError;
      return this.fetch();
    }
    // Stale: fetched again on this request, at most once a second (or
    // every refetchAfterMs) while usher does not answer; the stale set
    // serves if it fails.
    const now = this.now();
    if (now >= this.freshUntil && now - this.fetchedAt >= Math.max(1000, this.refetchAfterMs)) await this.fetch().catch(() => {});
  }

  async refetch() {
    if (this.inflight !== null) return this.inflight.then(() => true, () => false);
    if (this.now() - this.fetchedAt < this.refetchAfterMs) return false;
    return this.fetch().then(() => true, () => false);
  }

  fetch() {
    if (this.inflight !== null) return this.inflight;
    this.fetchedAt = this.now();
    this.fetches++;
    this.inflight = (async () => {
      try {
        const { jwks, maxAgeMs: age } = await this.load();
        const keys = await keysFromJwks(jwks);
        if (keys.size === 0) throw new Error("usher: the JWKS holds no Ed25519 key");
        this.keys = keys;
        this.freshUntil = this.now() + Math.min(age ?? this.cap, this.cap);
        this.lastError = null;
      } catch (err) {
        this.lastError = err;
        throw err;
      } finally {
        this.inflight = null;
      }
    })();
    return this.inflight;
  }
}

/** UsherError is a call to usher that got no usable answer. */
export class UsherError extends Error {
  constructor(message, { status, code, cause } = {}) {
    super(message, { cause });
    this.name = "UsherError";
    this.status = status;
    this.code = code;
  }
}

export function toUsher(name) {
  const n = name.toLowerCase();
  return !NOT_TO_USHER.has(n) && !n.startsWith("x-forwarded-") && !n.startsWith("x-original-") && !n.includes("_");
}

export function fromUsher(name) {
  return !NOT_FROM_USHER.has(name.toLowerCase());
}

export function wantsJSON(accept) {
  for (const part of (accept ?? "").split(",")) {
    const type = part.split(";")[0].trim().toLowerCase();
    if (type === "text/html") return false;
    if (type === "application/json") return true;
  }
  return false;
}

export function passFrom(authorization, cookie) {
  if (authorization && authorization.length > 7 && authorization.slice(0, 7).toLowerCase() === "bearer ") return authorization.slice(7).trim();
  for (const part of (cookie ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0 || part.slice(0, eq).trim() !== PASS_COOKIE) continue;
    let v = part.slice(eq + 1).trim();
    if (v.length > 1 && v.startsWith('"') && v.endsWith('"')) v = v.slice(1, -1);
    return v;
  }
  return "";
}

export function isOwn(path) {
  return path === "/_usher" || path.startsWith("/_usher/");
}

// pairs lists a Headers object as [name, value] pairs, Set-Cookie one each.
function pairs(headers) {
  const out = [];
  for (const [k, v] of headers) if (k !== "set-cookie") out.push([k, v]);
  for (const c of headers.getSetCookie?.() ?? []) out.push(["set-cookie", c]);
  return out;
}

const header = (list, name) => list.find(([k]) => k.toLowerCase() === name.toLowerCase())?.[1];

/** A Gate checks passes for one usher auth, from a Worker. */
export class Gate {
  /**
   * @param {object} o url (usher auth's address), room (an id or
   *   request => id), and optionally timeoutMs, failOpen, jwksUrl,
   *   refetchAfterMs, cacheSize, logger, now, fetch, clientIp.
   */
  constructor(o) {
    if (!o || typeof o.url !== "string") throw new TypeError("usher: options.url is required (usher auth's address)");
    if (typeof o.room !== "string" && typeof o.room !== "function") throw new TypeError("usher: options.room is required");
    this.base = o.url.replace(/\/+$/, "");
    this.room = typeof o.room === "function" ? o.room : () => o.room;
    this.now = o.now ?? Date.now;
    this.timeoutMs = o.timeoutMs ?? 5000;
    this.failOpen = o.failOpen === true;
    this.logger = o.logger === undefined ? console : o.logger;
    this.fetcher = o.fetch ?? ((...a) => fetch(...a));
    this.clientIp = o.clientIp ?? ((request) => request.headers.get("cf-connecting-ip") ?? undefined);
    this.cacheSize = o.cacheSize ?? 10_000;
    this.opened = new Map();
    this.stats = { offline: 0, asked: 0, renewed: 0, unavailable: 0, released: 0 };
    const jwksUrl = o.jwksUrl ?? this.base + JWKS_PATH;
    this.keys = new KeySet({
      now: this.now,
      refetchAfterMs: o.refetchAfterMs ?? 5000,
      load: async () => {
        const a = await this.fetcher(jwksUrl, { headers: { Accept: "application/json" }, signal: AbortSignal.timeout(this.timeoutMs) });
        if (a.status !== 200) throw new UsherError(`usher: GET ${jwksUrl}: status ${a.status}`, { status: a.status });
        return { jwks: await a.json(), maxAgeMs: maxAgeMs(a.headers.get("cache-control")) };
      },
    });
  }

  /** verify checks a pass for room offline; it rejects only when no JWKS could be had. */
  async verify(token, room, nowMs = this.now()) {
    await this.keys.ready();
    const seen = this.opened.get(token);
    if (seen !== undefined && this.keys.get(seen.kid) === seen.key) return this.judge(token, seen, room, nowMs);
    const get = (kid) => this.keys.get(kid);
    let opened = await openPass(token, get);
    if (opened.reason === UNKNOWN_KID && (await this.keys.refetch())) opened = await openPass(token, get);
    if (opened.verdict !== undefined) return opened;
    if (this.cacheSize > 0) {
      if (this.opened.size >= this.cacheSize) this.opened.delete(this.opened.keys().next().value);
      this.opened.set(token, opened);
    }
    return this.judge(token, opened, room, nowMs);
  }

  judge(token, opened, room, nowMs) {
    const v = judgePass(opened, room, nowMs);
    if (v.verdict === EXPIRED) this.opened.delete(token);
    return v;
  }

  // ask calls usher auth (or its release) about request.
  async ask(path, request, method, extraMs = 0) {
    const url = new URL(request.url);
    const h = new Headers();
    for (const [k, v] of pairs(request.headers)) if (toUsher(k)) h.append(k, v);
    h.set("X-Forwarded-Method", request.method);
    h.set("X-Forwarded-Uri", url.pathname + url.search);
    h.set("X-Forwarded-Host", url.host);
    h.set("X-Forwarded-Proto", url.protocol.replace(":", ""));
    const ip = this.clientIp(request);
    if (ip) h.set("X-Forwarded-For", ip);
    try {
      const a = await this.fetcher(this.base + path, { method, headers: h, redirect: "manual", signal: AbortSignal.timeout(this.timeoutMs + extraMs) });
      return { status: a.status, headers: pairs(a.headers), body: await a.arrayBuffer() };
    } catch (err) {
      throw new UsherError(`usher: ${method} ${path}: ${err.message}`, { cause: err });
    }
  }

  /**
   * check decides on a Request: {allowed: true, room, visitor, expiresAt,
   * pass, renewed, headers, cacheControl}, or {allowed: false, response}.
   */
  async check(request) {
    const room = this.room(request);
    const now = this.now();
    const token = passFrom(request.headers.get("authorization"), request.headers.get("cookie"));
    let pass = null;
    if (token) {
      let v = null;
      try {
        v = await this.verify(token, room, now);
      } catch (err) {
        this.warn(`usher: no JWKS (${err.message}): usher is asked about every pass`);
      }
      if (v?.verdict === VALID) {
        if (!renewalDue(v, now)) {
          this.stats.offline++;
          return allowed(v, token, false, []);
        }
        pass = v;
      }
    }
    const wait = Number.parseInt(request.headers.get("usher-wait") ?? "", 10);
    let a;
    try {
      this.stats.asked++;
      a = await this.ask(AUTH_PATH, request, "GET", wait >= 0 && wait <= 20 ? wait * 1000 : 0);
    } catch (err) {
      return this.unreachable(request, pass, token, err);
    }
    const fresh = header(a.headers, PASS_HEADER);
    if (a.status >= 200 && a.status < 300) {
      const visitor = header(a.headers, VISITOR_HEADER);
      const usherRoom = header(a.headers, ROOM_HEADER);
      if (usherRoom && usherRoom !== room) this.warn(`usher: usher auth puts this path in room ${usherRoom}, the connector in ${room}`);
      if (fresh) {
        this.stats.renewed++;
        return allowed(passOf(fresh, usherRoom ?? room, a.headers), fresh, true, credentials(a.headers));
      }
      if (pass) return allowed(pass, token, false, []);
      if (!visitor) return { allowed: true, headers: [] };
      return allowed({ room: usherRoom ?? room, visitor }, token || undefined, false, []);
    }
    if (a.status === 429 && fresh) {
      const exp = claimsOf(fresh)?.exp;
      const ttl = Math.max(0, Math.floor(((typeof exp === "number" ? exp * 1000 : now) - now) / 1000));
      const h = credentials(a.headers);
      h.push([PASS_TTL_HEADER, String(ttl)]);
      return allowed(passOf(fresh, room, a.headers), fresh, true, h);
    }
    if (pass && a.status >= 500) return this.unreachable(request, pass, token, new UsherError(`usher: status ${a.status}`));
    const h = new Headers();
    for (const [k, v] of a.headers) if (fromUsher(k)) h.append(k, v);
    return { allowed: false, response: new Response(a.status === 204 ? null : a.body, { status: a.status, headers: h }) };
  }

  unreachable(request, pass, token, err) {
    this.stats.unavailable++;
    this.warn(`usher: ${err.message}`);
    if (pass) return allowed(pass, token, false, []);
    if (this.failOpen) return { allowed: true, headers: [] };
    const json = wantsJSON(request.headers.get("accept"));
    return {
      allowed: false,
      response: new Response(json ? UNAVAILABLE_JSON : UNAVAILABLE_HTML, {
        status: 503,
        headers: {
          "Content-Type": json ? "application/json" : "text/html; charset=utf-8",
          "Cache-Control": "no-store",
          "Retry-After": String(UNAVAILABLE_RETRY),
          Vary: "Accept",
        },
      }),
    };
  }

  /**
   * release ends the slot of the visitor whose pass request carries, after
   * a purchase: it resolves to the headers to add to the response (the
   * pass cookie cleared) and rejects with an UsherError when usher did not
   * end it (the slot then lapses after the room's active_ttl).
   */
  async release(request) {
    const a = await this.ask(RELEASE_PATH, request, "POST");
    if (a.status !== 204) {
      let code;
      try {
        code = JSON.parse(new TextDecoder().decode(a.body))?.error?.code;
      } catch {
        code = undefined;
      }
      throw new UsherError(`usher: release: status ${a.status}${code ? ` ${code}` : ""}`, { status: a.status, code });
    }
    this.stats.released++;
    return [...a.headers.filter(([k]) => k.toLowerCase() === "set-cookie"), ["Cache-Control", CREDENTIAL_CACHE]];
  }

  /**
   * handle gates a Worker's request: usher's own routes (/_usher/) are
   * relayed to usher, a request with a valid pass goes to next(request)
   * (with Usher-Visitor and Usher-Room), every other gets usher's answer.
   * A response with Usher-Release: 1 ends the slot (in ctx.waitUntil) and
   * clears the pass.
   */
  async handle(request, ctx, next) {
    const url = new URL(request.url);
    if (isOwn(url.pathname)) return this.relay(request, url);
    const d = await this.check(request);
    if (!d.allowed) return d.response;
    const h = new Headers(request.headers);
    h.delete(VISITOR_HEADER);
    h.delete(ROOM_HEADER);
    if (d.visitor !== undefined) {
      h.set(VISITOR_HEADER, d.visitor);
      h.set(ROOM_HEADER, d.room);
    }
    const upstream = await next(new Request(request, { headers: h }), d);
    const res = new Response(upstream.body, upstream);
    for (const [k, v] of d.headers) res.headers.append(k, v);
    const release = res.headers.get(RELEASE_HEADER);
    res.headers.delete(RELEASE_HEADER);
    if (release !== null && /^(1|true)$/i.test(release)) {
      res.headers.delete(PASS_HEADER);
      const keep = res.headers.getSetCookie().filter((c) => !c.startsWith(PASS_COOKIE + "="));
      res.headers.delete("Set-Cookie");
      for (const c of keep) res.headers.append("Set-Cookie", c);
      const secure = url.protocol === "https:" ? " Secure;" : "";
      res.headers.append("Set-Cookie", `${PASS_COOKIE}=; Path=/; Max-Age=0; HttpOnly;${secure} SameSite=Lax`);
      res.headers.set("Cache-Control", CREDENTIAL_CACHE);
      const done = this.release(request).catch((err) => this.warn(`usher: Usher-Release: ${err.message}`));
      if (ctx?.waitUntil) ctx.waitUntil(done);
      else await done;
    } else if (d.cacheControl === CREDENTIAL_CACHE || (d.cacheControl && !res.headers.has("Cache-Control"))) {
      res.headers.set("Cache-Control", d.cacheControl);
    }
    return res;
  }

  // relay passes a request for usher's own routes to usher, bodies
  // streamed; /_usher/auth* is 404, and so are escapes and backslashes.
  async relay(request, url) {
    if (/%|\\|\/\//.test(url.pathname) || /^\/_usher\/auth(\/|$)/i.test(url.pathname)) {
      return new Response(NOT_FOUND_JSON, { status: 404, headers: { "Content-Type": "application/json", "Cache-Control": "no-store" } });
    }
    const h = new Headers();
    for (const [k, v] of pairs(request.headers)) if (toUsher(k) || k === "content-type") h.append(k, v);
    h.set("X-Forwarded-Host", url.host);
    h.set("X-Forwarded-Proto", url.protocol.replace(":", ""));
    const ip = this.clientIp(request);
    if (ip) h.set("X-Forwarded-For", ip);
    try {
      const a = await this.fetcher(this.base + url.pathname + url.search, {
        method: request.method,
        headers: h,
        body: request.method === "GET" || request.method === "HEAD" ? undefined : request.body,
        redirect: "manual",
      });
      const out = new Headers();
      for (const [k, v] of pairs(a.headers)) if (fromUsher(k)) out.append(k, v);
      return new Response(a.body, { status: a.status, headers: out });
    } catch (err) {
      this.warn(`usher: ${err.message}`);
      return new Response(UNAVAILABLE_JSON, { status: 503, headers: { "Content-Type": "application/json", "Retry-After": "2" } });
    }
  }

  warn(message) {
    this.logger?.warn(message);
  }
}

function allowed(p, token, renewed, headers) {
  const creds = renewed || headers.some(([k]) => k.toLowerCase() === "set-cookie");
  if (p.visitor !== undefined) headers.push(["Vary", "Cookie"], ["Vary", "Authorization"]);
  return {
    allowed: true,
    room: p.room,
    visitor: p.visitor,
    expiresAt: p.expiresAt,
    pass: token,
    renewed,
    headers,
    cacheControl: creds ? CREDENTIAL_CACHE : p.visitor !== undefined ? "private" : undefined,
  };
}

function passOf(token, room, answer) {
  const c = claimsOf(token) ?? {};
  return {
    room,
    visitor: header(answer, VISITOR_HEADER) ?? (typeof c.sub === "string" ? c.sub : undefined),
    expiresAt: typeof c.exp === "number" ? new Date(Math.floor(c.exp) * 1000) : undefined,
  };
}

function credentials(answer) {
  return answer.filter(([k]) => /^(set-cookie|usher-pass)$/i.test(k));
}

/**
 * withUsher wraps a module worker: options is the Gate's options, or a
 * function of env returning them (one Gate per isolate); handler is the
 * site's worker ({fetch(request, env, ctx)}; default: the origin, fetch).
 * A handler reads the admission as the request headers Usher-Visitor and
 * Usher-Room, and releases with the response header Usher-Release: 1.
 */
export function withUsher(options, handler = { fetch: (request) => fetch(request) }) {
  let gate = null;
  const gateFor = (env) => (gate ??= new Gate(typeof options === "function" ? options(env) : options));
  return {
    async fetch(request, env, ctx) {
      return gateFor(env).handle(request, ctx, (r) => handler.fetch(r, env, ctx));
    },
    /** gateFor is the isolate's Gate (for release, verify, check). */
    gateFor,
  };
}
