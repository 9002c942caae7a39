// The gate: decides on a request the way usher's Go gate does, without
// asking usher while the request's pass is valid and in the first half of
// its life, and through usher auth's forward-auth protocol otherwise
// (connectors/README.md). It decides and writes nothing: the framework
// adapters (node.js) or the caller write the decision.

import { Client, UsherError, header } from "./client.js";
import { KeySet, maxAgeMs } from "./keys.js";
import { EXPIRED, UNKNOWN_KID, VALID, claimsOf, judgePass, openPass, renewalDue } from "./pass.js";

export const PREFIX = "/_usher/";
const AUTH_PATH = "/_usher/auth";
const RELEASE_PATH = "/_usher/auth/release";
const JWKS_PATH = "/_usher/.well-known/jwks.json";

/** The pass cookie and the headers of usher's protocol (internal/wire). */
export const PASS_COOKIE = "usher_pass";
export const PASS_HEADER = "Usher-Pass";
export const PASS_TTL_HEADER = "Usher-Pass-TTL";
export const VISITOR_HEADER = "Usher-Visitor";
export const ROOM_HEADER = "Usher-Room";
export const RELEASE_HEADER = "Usher-Release";
/** The Cache-Control of an answer that carries a pass or usher's cookies. */
export const CREDENTIAL_CACHE = "private, no-store";

const UNAVAILABLE_RETRY = 5; // seconds, as the nginx and Caddy edges answer
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

// Headers a client sends that never reach usher: hop-by-hop ones, the body's,
// and those only the connector may set or that name the client or the
// public URL (internal/wire's header table, "to usher").
const NOT_TO_USHER = new Set([
  "host", "connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "trailer",
  "transfer-encoding", "upgrade", "http2-settings", "expect", "content-length", "content-type",
  "forwarded", "x-real-ip", "true-client-ip", "x-client-ip", "cf-connecting-ip", "fastly-client-ip",
  "x-cluster-client-ip", "x-proxyuser-ip", "usher-visitor", "usher-room", "usher-pass", "usher-pass-ttl",
  "usher-release",
]);
// Headers of usher's answer that the connector does not pass on: the
// connection's own, and those its server writes itself.
const NOT_FROM_USHER = new Set(["connection", "keep-alive", "transfer-encoding", "content-length", "date", "server", "trailer", "upgrade"]);

/** toUsher reports whether a client's header name may be forwarded to usher. */
export function toUsher(name) {
  const n = name.toLowerCase();
  return !NOT_TO_USHER.has(n) && !n.startsWith("x-forwarded-") && !n.startsWith("x-original-") && !n.includes("_");
}

/** fromUsher reports whether a header of usher's answer goes to the client. */
export function fromUsher(name) {
  return !NOT_FROM_USHER.has(name.toLowerCase());
}

/**
 * @typedef {object} Decision
 * @property {boolean} allowed the request may be served.
 * @property {string} [room] allowed: the room; visitor: the admitted visitor
 *   (both undefined on a path usher auth keeps open).
 * @property {string} [visitor]
 * @property {Date} [expiresAt] allowed: the pass's expiry.
 * @property {string} [pass] allowed: the pass to use from now on.
 * @property {boolean} [renewed] allowed: pass is new; headers hand it over.
 * @property {Array<[string, string]>} headers allowed: to add to the
 *   response; refused: the whole answer's headers.
 * @property {string} [cacheControl] allowed: the response's Cache-Control:
 *   "private, no-store" (it carries a pass: must win over the site's), or
 *   "private" (for one visitor: unless the site says otherwise).
 * @property {number} [status] refused: the answer's status.
 * @property {Buffer} [body] refused: the answer's body.
 */

/** A Gate checks passes for one usher auth. */
export class Gate {
  /**
   * @param {object} o see README.md.
   */
  constructor(o) {
    if (!o || typeof o.url !== "string") throw new TypeError("usher: options.url is required (usher auth's address)");
    if (typeof o.room !== "string" && typeof o.room !== "function") {
      throw new TypeError("usher: options.room is required: a room id, or a function of the request");
    }
    if (typeof o.room === "string" && !/^[a-z0-9][a-z0-9-]{0,63}$/.test(o.room)) {
      throw new TypeError(`usher: room ${JSON.stringify(o.room)}: want [a-z0-9][a-z0-9-]{0,63}`);
    }
    this.client = new Client(o.url, { agent: o.agent });
    this.room = typeof o.room === "function" ? o.room : () => o.room;
    this.now = o.now ?? Date.now;
    this.timeoutMs = o.timeoutMs ?? 5000;
    this.failOpen = o.failOpen === true;
    this.clientIp = o.clientIp ?? defaultClientIp;
    this.logger = o.logger === undefined ? console : o.logger;
    this.warned = new Map(); // kind of warning → when last logged
    this.quiet = new Map(); // pass → time before which it is not asked to be renewed again
    this.cacheSize = o.cacheSize ?? 10_000;
    this.opened = new Map(); // pass → its signed claims (openPass), oldest first
    this.stats = { offline: 0, asked: 0, renewed: 0, unavailable: 0, released: 0 };
    const jwksUrl = o.jwksUrl ?? this.client.base + JWKS_PATH;
    const jwksClient = o.jwksUrl ? new Client(o.jwksUrl, { agent: o.agent }) : this.client;
    const jwksTarget = o.jwksUrl ? "" : JWKS_PATH;
    this.keys = new KeySet({
      now: this.now,
      refetchAfterMs: o.refetchAfterMs ?? 5000,
      load: async () => {
        const a = await jwksClient.call(jwksTarget, { timeoutMs: this.timeoutMs, headers: [["Accept", "application/json"]] });
        if (a.status !== 200) throw new UsherError(`usher: GET ${jwksUrl}: status ${a.status}`, { status: a.status });
        return { jwks: JSON.parse(a.body.toString("utf8")), maxAgeMs: maxAgeMs(header(a.headers, "cache-control")) };
      },
    });
  }

  /**
   * verify checks a pass for room offline, against usher's JWKS (fetched
   * when needed, and again when the pass names a kid it lacks). It resolves
   * to verifyPass's result; it rejects only when no JWKS could ever be had.
   */
  async verify(token, room, nowMs = this.now()) {
    await this.keys.ready();
    // A visitor shows the same pass on every request: its signature is
    // checked once, while the key that signed it is still the one held;
    // the clock and the room are judged every time.
    const seen = this.opened.get(token);
    if (seen !== undefined && this.keys.get(seen.kid) === seen.key) return this.judge(token, seen, room, nowMs);
    const get = (kid) => this.keys.get(kid);
    let opened = openPass(token, get);
    if (opened.reason === UNKNOWN_KID && (await this.keys.refetch())) opened = openPass(token, get);
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

  /**
   * check decides on a request: a Node IncomingMessage (Express's, with
   * originalUrl and ip), a Fetch API Request, or {method, url, headers, ip}.
   * @returns {Promise<Decision>}
   */
  async check(request) {
    const rq = describe(request, this.clientIp);
    const room = this.room(request);
    const now = this.now();
    let pass = null; // valid offline, due for renewal
    if (rq.pass) {
      let v = null;
      try {
        v = await this.verify(rq.pass, room, now);
      } catch (err) {
        this.warn("jwks", `usher: no JWKS (${err.message}): usher is asked about every pass`);
      }
      if (v?.verdict === VALID) {
        if (!renewalDue(v, now) || (this.quiet.get(rq.pass) ?? 0) > now) {
          this.stats.offline++;
          return allowed(v, rq.pass, false, []);
        }
        pass = v;
      }
    }
    let a;
    try {
      this.stats.asked++;
      a = await this.client.call(AUTH_PATH, { headers: forwarded(rq), timeoutMs: this.timeoutMs + rq.waitMs });
    } catch (err) {
      return this.unreachable(rq, pass, err);
    }
    if (a.status >= 200 && a.status < 300) return this.passed(a, rq, room, pass, now);
    const fresh = header(a.headers, PASS_HEADER);
    if (a.status === 429 && fresh) {
      // A JSON client admitted by this very request: served at once, as
      // usher proxy does, with its pass and how long its slot lasts.
      const exp = claimsOf(fresh)?.exp;
      const ttl = Math.max(0, Math.floor(((typeof exp === "number" ? exp * 1000 : now) - now) / 1000));
      const headers = credentialHeaders(a.headers);
      headers.push([PASS_TTL_HEADER, String(ttl)]);
      return allowed(passOf(fresh, room, a.headers), fresh, true, headers);
    }
    if (pass && a.status >= 500) return this.unreachable(rq, pass, new UsherError(`usher: status ${a.status}`, { status: a.status }));
    return { allowed: false, status: a.status, headers: a.headers.filter(([k]) => fromUsher(k)), body: a.body };
  }

  // passed makes the decision for usher's 2xx: the request passes, with
  // the renewed pass if usher gave one.
  passed(a, rq, room, pass, now) {
    const fresh = header(a.headers, PASS_HEADER);
    const visitor = header(a.headers, VISITOR_HEADER);
    const usherRoom = header(a.headers, ROOM_HEADER);
    if (usherRoom && usherRoom !== room) {
      this.warn(`room ${usherRoom} ${room}`,
        `usher: usher auth puts ${rq.target} in room ${usherRoom}, the connector in ${room}: usher is asked about every pass`);
    }
    if (fresh) {
      this.stats.renewed++;
      return allowed(passOf(fresh, usherRoom ?? room, a.headers), fresh, true, credentialHeaders(a.headers));
    }
    if (pass) {
      // Not renewed yet (usher's clock or the slot's ttl differ a little
      // from the pass's): not asked again for a second.
      if (this.quiet.size >= 10_000) this.quiet.clear();
      this.quiet.set(rq.pass, now + 1000);
      return allowed(pass, rq.pass, false, []);
    }
    if (!visitor) return { allowed: true, headers: [] }; // an open path, or a bypass
    return allowed({ room: usherRoom ?? room, visitor }, rq.pass || undefined, false, []);
  }

  // unreachable decides when usher gave no usable answer: a pass valid
  // offline passes (its renewal is best effort), else fail open or closed.
  unreachable(rq, pass, err) {
    this.stats.unavailable++;
    this.warn("unreachable", `usher: ${err.message}${pass ? " (a valid pass passes)" : this.failOpen ? " (failing open)" : ""}`);
    if (pass) return allowed(pass, rq.pass, false, []);
    if (this.failOpen) return { allowed: true, headers: [] };
    const json = wantsJSON(rq.header("accept"));
    return {
      allowed: false,
      status: 503,
      headers: [
        ["Content-Type", json ? "application/json" : "text/html; charset=utf-8"],
        ["Cache-Control", "no-store"],
        ["Retry-After", String(UNAVAILABLE_RETRY)],
        ["Vary", "Accept"],
      ],
      body: Buffer.from(json ? UNAVAILABLE_JSON : UNAVAILABLE_HTML),
    };
  }

  /**
   * release ends the slot of the visitor whose pass the request carries,
   * after a purchase, so that the next visitor is admitted at once. It
   * resolves to the headers to add to the response (the pass cookie
   * cleared) and rejects with an UsherError when usher did not end it (the
   * slot then lapses after the room's active_ttl by itself).
   * @returns {Promise<Array<[string, string]>>}
   */
  async release(request) {
    const rq = describe(request, this.clientIp);
    const a = await this.client.call(RELEASE_PATH, { method: "POST", headers: forwarded(rq), timeoutMs: this.timeoutMs });
    if (a.status !== 204) {
      let code;
      try {
        code = JSON.parse(a.body.toString("utf8"))?.error?.code;
      } catch {
        code = undefined;
      }
      throw new UsherError(`usher: release: status ${a.status}${code ? ` ${code}` : ""}`, { status: a.status, code });
    }
    this.stats.released++;
    return [...a.headers.filter(([k]) => k.toLowerCase() === "set-cookie"), ["Cache-Control", CREDENTIAL_CACHE]];
  }

  // warn logs message, at most once every 10 s for each kind: a usher that
  // is down is not logged once per request.
  warn(kind, message) {
    if (!this.logger) return;
    const now = Date.now();
    if (now - (this.warned.get(kind) ?? -Infinity) < 10_000) return;
    if (this.warned.size >= 100) this.warned.clear();
    this.warned.set(kind, now);
    this.logger.warn(message);
  }
}

// allowed is a passing decision for pass (verifyPass's result or the like).
function allowed(p, token, renewed, headers) {
  const credentials = renewed || headers.some(([k]) => k.toLowerCase() === "set-cookie");
  if (p.visitor !== undefined) headers.push(["Vary", "Cookie"], ["Vary", "Authorization"]);
  return {
    allowed: true,
    room: p.room,
    visitor: p.visitor,
    expiresAt: p.expiresAt,
    pass: token,
    renewed,
    headers,
    cacheControl: credentials ? CREDENTIAL_CACHE : p.visitor !== undefined ? "private" : undefined,
  };
}

// passOf reads a pass usher just handed over (not verified: it is usher's
// own answer on the connector's connection).
function passOf(token, room, answerHeaders) {
  const c = claimsOf(token) ?? {};
  return {
    room,
    visitor: header(answerHeaders, VISITOR_HEADER) ?? (typeof c.sub === "string" ? c.sub : undefined),
    expiresAt: typeof c.exp === "number" ? new Date(Math.floor(c.exp) * 1000) : undefined,
  };
}

// credentialHeaders are the headers of usher's answer that hand the client
// its pass: Usher-Pass and every Set-Cookie.
function credentialHeaders(answerHeaders) {
  return answerHeaders.filter(([k]) => {
    const n = k.toLowerCase();
    return n === "set-cookie" || n === "usher-pass";
  });
}

/** wantsJSON reports whether Accept lists application/json before any text/html. */
export function wantsJSON(accept) {
  for (const part of (accept ?? "").split(",")) {
    const type = part.split(";")[0].trim().toLowerCase();
    if (type === "text/html") return false;
    if (type === "application/json") return true;
  }
  return false;
}

function defaultClientIp(request) {
  return request.ip ?? request.socket?.remoteAddress;
}

// describe reads what the gate needs of a request, whatever its shape.
export function describe(request, clientIp) {
  let headerPairs;
  if (Array.isArray(request.rawHeaders)) {
    headerPairs = [];
    for (let i = 0; i + 1 < request.rawHeaders.length; i += 2) headerPairs.push([request.rawHeaders[i], request.rawHeaders[i + 1]]);
  } else if (typeof request.headers?.entries === "function") {
    headerPairs = [...request.headers.entries()];
  } else {
    headerPairs = [];
    for (const [k, v] of Object.entries(request.headers ?? {})) {
      for (const one of Array.isArray(v) ? v : [v]) if (one !== undefined) headerPairs.push([k, String(one)]);
    }
  }
  const get = (name) => header(headerPairs, name);
  let target = request.originalUrl ?? request.url ?? "/";
  let host = get("host");
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(target)) {
    const u = new URL(target);
    target = u.pathname + u.search;
    host ??= u.host;
  }
  const wait = Number.parseInt(get("usher-wait") ?? "", 10);
  return {
    method: request.method ?? "GET",
    target,
    host: host ?? "",
    proto: request.protocol ?? (request.socket?.encrypted ? "https" : "http"),
    ip: clientIp(request),
    headers: headerPairs,
    header: get,
    pass: passFrom(get("authorization"), get("cookie")),
    // A poll may ask usher to hold it (Usher-Wait, up to 20 s).
    waitMs: wait >= 0 && wait <= 20 ? wait * 1000 : 0,
  };
}

/**
 * passFrom returns the pass of a request: from `Authorization: Bearer`,
 * else the usher_pass cookie; "" for none. The header wins even when its
 * pass is bad, as in Go's gate.PassFrom.
 */
export function passFrom(authorization, cookie) {
  if (authorization && authorization.length > 7 && authorization.slice(0, 7).toLowerCase() === "bearer ") {
    return authorization.slice(7).trim();
  }
  for (const part of (cookie ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0 || part.slice(0, eq).trim() !== PASS_COOKIE) continue;
    let v = part.slice(eq + 1).trim();
    if (v.length > 1 && v.startsWith('"') && v.endsWith('"')) v = v.slice(1, -1);
    return v;
  }
  return "";
}

// forwarded is what usher auth is sent about rq: the client's headers
// (toUsher), and the original request as the connector saw it.
function forwarded(rq) {
  const out = rq.headers.filter(([k]) => toUsher(k));
  out.push(
    ["X-Forwarded-Method", rq.method],
    ["X-Forwarded-Uri", rq.target],
    ["X-Forwarded-Host", rq.host],
    ["X-Forwarded-Proto", rq.proto],
  );
  if (rq.ip) out.push(["X-Forwarded-For", rq.ip]);
  return out;
}
