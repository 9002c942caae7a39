// The gate for Node's own HTTP server and what builds on it (Express,
// Connect, Fastify's raw request): it writes the gate's decisions, relays
// usher's own routes under /_usher/, and honours Usher-Release.

import { Gate, CREDENTIAL_CACHE, PASS_COOKIE, PASS_HEADER, PREFIX, RELEASE_HEADER, describe, fromUsher, toUsher } from "./gate.js";
import { flat, pairs } from "./client.js";

const RELAY_HEADER_TIMEOUT_MS = 30_000; // usher's own routes; bodies may stream longer
const NOT_FOUND_JSON = JSON.stringify({ error: { code: "not_found", message: "no such route" } });
const guarded = Symbol("usher guard");

/** NodeGate is a Gate with the adapters for Node's http.IncomingMessage. */
export class NodeGate extends Gate {
  /**
   * middleware returns Express/Connect middleware: it relays /_usher/ to
   * usher, lets a request with a valid pass through to next() (req.usher
   * names the visitor), and answers every other request itself.
   */
  middleware() {
    return (req, res, next) => {
      this.handle(req, res).then((pass) => pass && next(), next);
    };
  }

  /**
   * handle gates a request of Node's http server. It resolves to true when
   * the request may be served (req.usher is set, and the renewed pass is on
   * res), false when it has been answered (the waiting page, JSON, a
   * refusal, or usher's own route).
   */
  async handle(req, res) {
    const target = req.originalUrl ?? req.url;
    if (isOwn(target)) {
      await this.relay(req, res);
      return false;
    }
    const d = await this.check(req);
    if (!d.allowed) {
      writeAnswer(res, d.status, d.headers, d.body);
      return false;
    }
    req.usher = { room: d.room, visitor: d.visitor, expiresAt: d.expiresAt, pass: d.pass, renewed: d.renewed };
    // The visitor and room as nginx and Caddy hand them to an origin, so
    // that a site moved from behind them reads them as before.
    delete req.headers["usher-visitor"];
    delete req.headers["usher-room"];
    if (d.visitor !== undefined) {
      req.headers["usher-visitor"] = d.visitor;
      req.headers["usher-room"] = d.room;
    }
    for (const [k, v] of d.headers) res.appendHeader(k, v);
    this.guard(req, res, d.cacheControl);
    return true;
  }

  /**
   * release ends the slot of the visitor whose pass req carries, after a
   * purchase, and clears the pass on res (when given and not yet sent). It
   * resolves to the headers it added, and rejects with an UsherError when
   * usher did not end the slot (which then lapses after the room's
   * active_ttl by itself).
   */
  async release(req, res) {
    const headers = await super.release(req);
    if (res && !res.headersSent) {
      res.removeHeader(PASS_HEADER);
      setCookies(res, withoutPass(res.getHeader("Set-Cookie")));
      for (const [k, v] of headers) {
        if (k.toLowerCase() === "cache-control") res.setHeader(k, v);
        else res.appendHeader(k, v);
      }
    }
    if (req.usher) req.usher.released = true;
    return headers;
  }

  // guard wraps res.writeHead, once, to apply what the answer needs when
  // the site writes it: Cache-Control (a pass's answer is stored by no
  // cache, a gated one is private), and Usher-Release: 1 or true from the
  // site, which ends the slot (in the background) and clears the pass.
  guard(req, res, cacheControl) {
    if (res[guarded]) return;
    res[guarded] = true;
    const writeHead = res.writeHead;
    const gate = this;
    res.writeHead = function (statusCode, ...rest) {
      res.writeHead = writeHead;
      const i = rest.findIndex((h) => h !== null && typeof h === "object");
      if (i >= 0) {
        mergeHeaders(this, rest[i]);
        rest.splice(i, 1);
      }
      const release = this.getHeader(RELEASE_HEADER);
      this.removeHeader(RELEASE_HEADER);
      if (release !== undefined && /^(1|true)$/i.test(String(release))) {
        this.removeHeader(PASS_HEADER);
        const secure = req.protocol === "https" || req.socket?.encrypted ? " Secure;" : "";
        setCookies(this, [
          ...withoutPass(this.getHeader("Set-Cookie")),
          `${PASS_COOKIE}=; Path=/; Max-Age=0; HttpOnly;${secure} SameSite=Lax`,
        ]);
        this.setHeader("Cache-Control", CREDENTIAL_CACHE);
        gate.release(req).catch((err) => gate.warn("release", `usher: Usher-Release: ${err.message}`));
      } else if (cacheControl === CREDENTIAL_CACHE) {
        this.setHeader("Cache-Control", CREDENTIAL_CACHE);
      } else if (cacheControl && !this.hasHeader("Cache-Control")) {
        this.setHeader("Cache-Control", cacheControl);
      }
      return writeHead.call(this, statusCode, ...rest);
    };
  }

  /**
   * relay passes a request for usher's own routes (/_usher/: the waiting
   * page's proof-of-work worker, the visitors' API) to usher and its answer
   * back, bodies streamed. /_usher/auth* is usher's question to edges, not
   * a client's: 404. Targets that usher would decode into another path
   * (escapes, dot segments, backslashes) are not relayed.
   */
  async relay(req, res) {
    const target = req.originalUrl ?? req.url;
    const path = target.split("?")[0];
    if (/%|\\|\/\/|\/\.\.?(\/|$)/.test(path) || /^\/_usher\/auth(\/|$)/i.test(path)) {
      writeAnswer(res, 404, [["Content-Type", "application/json"], ["Cache-Control", "no-store"]], Buffer.from(NOT_FOUND_JSON));
      req.resume();
      return;
    }
    const rq = describe(req, this.clientIp);
    const headers = rq.headers.filter(([k]) => toUsher(k) || /^content-(length|type)$|^transfer-encoding$/i.test(k));
    headers.push(["Host", rq.host], ["X-Forwarded-Proto", rq.proto]);
    if (rq.ip) headers.push(["X-Forwarded-For", rq.ip]);
    const { req: up, response } = this.client.open(target, { method: req.method, headers, timeoutMs: RELAY_HEADER_TIMEOUT_MS });
    req.pipe(up);
    let answer;
    try {
      answer = await response;
    } catch (err) {
      this.warn("unreachable", `usher: ${err.message}`);
      if (!res.headersSent) writeAnswer(res, 503, [["Content-Type", "application/json"], ["Retry-After", "2"]], Buffer.from(
        JSON.stringify({ error: { code: "unavailable", message: "a backend is unavailable; retry later" } })));
      return;
    }
    res.writeHead(answer.statusCode, flat(pairs(answer.rawHeaders).filter(([k]) => fromUsher(k) || /^content-length$/i.test(k))));
    answer.pipe(res);
    await new Promise((resolve) => {
      res.once("close", () => {
        if (!answer.complete) up.destroy(); // the client went away: so does the call
        resolve();
      });
      answer.once("error", (err) => {
        res.destroy(err);
        resolve();
      });
    });
  }
}

/** isOwn reports whether a request target is usher's own route (/_usher/…). */
export function isOwn(target) {
  return target === PREFIX.slice(0, -1) || target.startsWith(PREFIX) || target.startsWith(PREFIX.slice(0, -1) + "?");
}

function writeAnswer(res, status, headers, body) {
  res.statusCode = status;
  for (const [k, v] of headers) res.appendHeader(k, v);
  res.setHeader("Content-Length", body.length);
  res.end(body);
}

// mergeHeaders moves the headers given to writeHead onto res, as Node
// would give them precedence, except Set-Cookie, which is added to the
// connector's.
function mergeHeaders(res, given) {
  const list = Array.isArray(given) ? (Array.isArray(given[0]) ? given : pairsOf(given)) : Object.entries(given);
  const cookies = [];
  const set = new Map();
  for (const [k, v] of list) {
    if (String(k).toLowerCase() === "set-cookie") cookies.push(...[v].flat());
    else set.set(k, set.has(k) ? [set.get(k), v].flat() : v);
  }
  for (const [k, v] of set) res.setHeader(k, v);
  if (cookies.length > 0) {
    const had = res.getHeader("Set-Cookie");
    setCookies(res, [...(had === undefined ? [] : [had].flat().map(String)), ...cookies.map(String)]);
  }
}

function setCookies(res, cookies) {
  if (cookies.length === 0) res.removeHeader("Set-Cookie");
  else res.setHeader("Set-Cookie", cookies);
}

function pairsOf(flatList) {
  const out = [];
  for (let i = 0; i + 1 < flatList.length; i += 2) out.push([flatList[i], flatList[i + 1]]);
  return out;
}

// withoutPass drops the Set-Cookie values that set the pass cookie.
function withoutPass(setCookie) {
  const all = setCookie === undefined ? [] : [setCookie].flat().map(String);
  return all.filter((c) => !c.startsWith(PASS_COOKIE + "="));
}
