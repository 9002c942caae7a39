// The connector's HTTP client for usher: every call has a deadline, and
// answers keep their headers as [name, value] pairs (Set-Cookie repeats).

import http from "node:http";
import https from "node:https";

/** UsherError is a call to usher that got no usable answer. */
export class UsherError extends Error {
  constructor(message, { status, code, cause } = {}) {
    super(message, { cause });
    this.name = "UsherError";
    this.status = status;
    this.code = code;
  }
}

const MAX_ANSWER_BYTES = 1 << 20; // a waiting page is tens of kilobytes

export class Client {
  /**
   * @param {string} base usher's URL, such as http://127.0.0.1:8092
   * @param {object} [o]
   * @param {http.Agent} [o.agent] keep-alive agent (default: one of its own)
   */
  constructor(base, { agent } = {}) {
    const u = new URL(base);
    if (u.protocol !== "http:" && u.protocol !== "https:") {
      throw new TypeError(`usher: url ${base}: want http:// or https://`);
    }
    this.base = u.origin + u.pathname.replace(/\/+$/, "");
    this.host = u.host;
    this.transport = u.protocol === "https:" ? https : http;
    this.agent = agent ?? new this.transport.Agent({ keepAlive: true, maxSockets: 256 });
  }

  /**
   * open starts a request to usher's path (and query); the caller writes
   * the body and ends it. It resolves to the response once its headers
   * arrive within timeoutMs; the response body is the caller's to read.
   */
  open(target, { method = "GET", headers = [], timeoutMs }) {
    // Node adds no Host to a header list: usher's, unless the caller named one.
    const withHost = headers.some(([k]) => k.toLowerCase() === "host") ? headers : [["Host", this.host], ...headers];
    const req = this.transport.request(this.base + target, {
      method,
      agent: this.agent,
      headers: flat(withHost),
    });
    const response = new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        req.destroy(new UsherError(`usher: ${method} ${target}: no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      req.once("response", (res) => {
        clearTimeout(timer);
        resolve(res);
      });
      req.once("error", (err) => {
        clearTimeout(timer);
        const e = err instanceof UsherError ? err : new UsherError(`usher: ${method} ${target}: ${err.message}`, { cause: err });
        // A kept-alive connection usher closed as this request went out:
        // usher never read it, so it may be sent again.
        e.unsent = req.reusedSocket && (err.code === "ECONNRESET" || err.code === "EPIPE");
        reject(e);
      });
    });
    return { req, response };
  }

  /**
   * call asks usher without a request body and reads the whole answer
   * within timeoutMs: {status, headers: [[name, value]], body: Buffer}.
   */
  async call(target, { method = "GET", headers = [], timeoutMs }) {
    const deadline = Date.now() + timeoutMs;
    let res;
    for (let attempt = 0; ; attempt++) {
      const { req, response } = this.open(target, { method, headers, timeoutMs });
      req.end();
      try {
        res = await response;
        break;
      } catch (err) {
        if (!err.unsent || attempt > 0) throw err;
      }
    }
    const body = await new Promise((resolve, reject) => {
      const chunks = [];
      let size = 0;
      const timer = setTimeout(() => res.destroy(new UsherError(`usher: ${method} ${target}: answer body too slow`)),
        Math.max(0, deadline - Date.now()));
      res.on("data", (c) => {
        size += c.length;
        if (size > MAX_ANSWER_BYTES) res.destroy(new UsherError(`usher: ${method} ${target}: answer over ${MAX_ANSWER_BYTES} bytes`));
        else chunks.push(c);
      });
      res.once("end", () => {
        clearTimeout(timer);
        resolve(Buffer.concat(chunks));
      });
      res.once("error", (err) => {
        clearTimeout(timer);
        reject(err instanceof UsherError ? err : new UsherError(`usher: ${method} ${target}: ${err.message}`, { cause: err }));
      });
    });
    return { status: res.statusCode, headers: pairs(res.rawHeaders), body };
  }
}

/** pairs turns Node's rawHeaders ([k, v, k, v]) into [[k, v]] pairs. */
export function pairs(raw) {
  const out = [];
  for (let i = 0; i + 1 < raw.length; i += 2) out.push([raw[i], raw[i + 1]]);
  return out;
}

/** flat turns [[k, v]] pairs into Node's flat header list. */
export function flat(headerPairs) {
  const out = [];
  for (const [k, v] of headerPairs) out.push(k, v);
  return out;
}

/** header returns the first value of name (any case) in pairs, or undefined. */
export function header(headerPairs, name) {
  const n = name.toLowerCase();
  for (const [k, v] of headerPairs) if (k.toLowerCase() === n) return v;
  return undefined;
}
