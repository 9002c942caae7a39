// usher proof-of-work worker, served by the proxy at /_usher/pow.js.
//
// The waiting page posts {token, bits}; the worker finds a nonce (the hex
// of a counter from 0, as Go's pow.Solve) such that
// SHA-256(token ":" nonce) starts with bits zero bits. While it works it
// posts {tried} about every 100 ms; at the end {nonce, tried, impl}, or
// {error}.
//
// It hashes with WebCrypto (crypto.subtle), which browsers offer only in a
// secure context (https, or http on localhost). Elsewhere crypto.subtle is
// undefined and the worker uses the small SHA-256 below, so the page never
// gets stuck; {impl: "js"} in the message forces it (tests, benchmarks).
// {sha256: ["…", …]} answers {digests: ["<hex>", …]} from that SHA-256:
// the browser test compares it with Go's crypto/sha256.
"use strict";

// SHA-256 (FIPS 180-4). K and H0 are the first 32 bits of the fractional
// parts of the cube roots (K) and square roots (H0) of the first 64 primes.
var K = new Uint32Array(64), H0 = new Uint32Array(8), W = new Uint32Array(64);
(function () {
  function frac(x) { return ((x - Math.floor(x)) * 4294967296) >>> 0; }
  for (var n = 0, p = 2; n < 64; p++) {
    var prime = true;
    for (var d = 2; d * d <= p; d++) if (p % d === 0) { prime = false; break; }
    if (!prime) continue;
    if (n < 8) H0[n] = frac(Math.sqrt(p));
    K[n++] = frac(Math.cbrt(p));
  }
})();

function rotr(x, n) { return (x >>> n) | (x << (32 - n)); }

// sha256 returns the digest of the bytes msg (a Uint8Array).
function sha256(msg) {
  var len = msg.length, size = (len + 9 + 63) & ~63;
  var buf = new Uint8Array(size), dv = new DataView(buf.buffer);
  buf.set(msg);
  buf[len] = 0x80;
  dv.setUint32(size - 8, Math.floor(len / 0x20000000)); // the length in bits, big-endian
  dv.setUint32(size - 4, (len << 3) >>> 0);
  var h = H0.slice(), i;
  for (var off = 0; off < size; off += 64) {
    for (i = 0; i < 16; i++) W[i] = dv.getUint32(off + 4 * i);
    for (i = 16; i < 64; i++) {
      var x = W[i - 15], y = W[i - 2];
      W[i] = W[i - 16] + (rotr(x, 7) ^ rotr(x, 18) ^ (x >>> 3)) + W[i - 7] + (rotr(y, 17) ^ rotr(y, 19) ^ (y >>> 10));
    }
    var a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (i = 0; i < 64; i++) {
      var t1 = (k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + W[i]) | 0;
      var t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      k = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
    }
    // A Uint32Array stores each sum modulo 2^32.
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += k;
  }
  var out = new Uint8Array(32), odv = new DataView(out.buffer);
  for (i = 0; i < 8; i++) odv.setUint32(4 * i, h[i]);
  return out;
}

// zeros counts the leading zero bits of the bytes d.
function zeros(d) {
  for (var i = 0, n = 0; i < d.length; i++, n += 8) {
    if (d[i] !== 0) return n + Math.clz32(d[i]) - 24;
  }
  return n;
}

var enc = new TextEncoder();

// solveSubtle hashes in batches: WebCrypto answers each digest with a
// promise, and waiting for one at a time would spend more time in the
// event loop than in SHA-256.
async function solveSubtle(token, bits, progress) {
  var prefix = token + ":", batch = 256;
  for (var i = 0; ; i += batch) {
    var work = [];
    for (var j = 0; j < batch; j++) {
      work.push(crypto.subtle.digest("SHA-256", enc.encode(prefix + (i + j).toString(16))));
    }
    var sums = await Promise.all(work);
    for (j = 0; j < batch; j++) {
      if (zeros(new Uint8Array(sums[j])) >= bits) return { nonce: (i + j).toString(16), tried: i + j + 1 };
    }
    progress(i + batch);
  }
}

function solveJS(token, bits, progress) {
  var prefix = enc.encode(token + ":"), n = prefix.length;
  var msg = new Uint8Array(n + 16); // a nonce is at most 16 hex digits
  msg.set(prefix);
  for (var i = 0; ; i++) {
    var s = i.toString(16);
    for (var j = 0; j < s.length; j++) msg[n + j] = s.charCodeAt(j);
    if (zeros(sha256(msg.subarray(0, n + s.length))) >= bits) return { nonce: s, tried: i + 1 };
    if ((i & 1023) === 1023) progress(i + 1);
  }
}

function hex(d) {
  var s = "";
  for (var i = 0; i < d.length; i++) s += (d[i] < 16 ? "0" : "") + d[i].toString(16);
  return s;
}

onmessage = function (ev) {
  var m = ev.data;
  if (m.sha256) {
    postMessage({ digests: m.sha256.map(function (s) { return hex(sha256(enc.encode(s))); }) });
    return;
  }
  var subtle = self.crypto && self.crypto.subtle && m.impl !== "js";
  var last = 0;
  function progress(tried) {
    var now = Date.now();
    if (now - last >= 100) { last = now; postMessage({ tried: tried }); }
  }
  function done(r) { r.impl = subtle ? "webcrypto" : "js"; postMessage(r); }
  function failed(e) { postMessage({ error: String(e) }); }
  if (subtle) {
    solveSubtle(m.token, m.bits, progress).then(done, failed);
    return;
  }
  try { done(solveJS(m.token, m.bits, progress)); } catch (e) { failed(e); }
};
