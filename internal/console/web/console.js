// usher's operator console: a single page, no build step, no libraries.
// Every URL is relative, so the same page works at /console/ (usher serve)
// and at /_usher/console/ (usher proxy). Untrusted text goes into the page
// through textContent only.
"use strict";

const $ = (id) => document.getElementById(id);
const state = {
  csrf: "", booking: false, live: null, rooms: new Map(), room: "", view: "",
  history: null, settings: null, eventsNext: "", schedulesNext: "",
};

// el builds an element: el("td", {class: "n"}, "12", child…).
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v; else e.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
  return e;
}

// --- numbers -----------------------------------------------------------
const nf = new Intl.NumberFormat("en-US");
function int(n) { return n === undefined || n === null ? "–" : nf.format(Math.round(n)); }
function rate(x) {
  if (x === undefined || x === null) return "–";
  if (x >= 100) return nf.format(Math.round(x));
  return (Math.round(x * 10) / 10).toString();
}
function pct(x) { return x === undefined || x === null ? "–" : (x * 100).toFixed(1) + " %"; }
function signedPct(x) { return x === undefined || x === null ? "–" : (x > 0 ? "+" : "") + (x * 100).toFixed(0) + " %"; }
function msText(x) { return x === undefined || x === null ? "–" : nf.format(Math.round(x)) + " ms"; }
function clock(d) { return d.toLocaleTimeString("en-GB", { hour12: false }); }
function stateLabel(s) { return (s || "").replace("_", " "); }

// --- HTTP --------------------------------------------------------------
async function call(method, path, body) {
  const opts = { method, headers: {}, credentials: "same-origin" };
  if (method !== "GET") opts.headers["X-Usher-CSRF"] = state.csrf;
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const res = await fetch(path, opts);
  let data = null;
  const text = await res.text();
  if (text) { try { data = JSON.parse(text); } catch (_) { data = null; } }
  if (res.status === 401 && path !== "session") { signedOut(); }
  return { status: res.status, ok: res.ok, data };
}
function message(r) {
  if (r.data && r.data.error) return r.data.error.message + " (" + r.data.error.code + ")";
  return "HTTP " + r.status;
}

// --- sign-in -----------------------------------------------------------
async function start() {
  const r = await call("GET", "session");
  if (r.ok) { signedIn(r.data); } else { signedOut(); }
}
function signedIn(info) {
  state.csrf = info.csrf;
  state.booking = info.booking;
  $("signin-view").hidden = true;
  $("bar").hidden = false;
  connect();
  route();
}
function signedOut() {
  state.csrf = "";
  if (state.live) { state.live.close(); state.live = null; }
  for (const v of ["rooms-view", "room-view", "schedules-view", "bar"]) $(v).hidden = true;
  $("signin-view").hidden = false;
  $("key").focus();
}
$("signin").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  $("signin-error").textContent = "";
  $("signin-button").disabled = true;
  try {
    const r = await call("POST", "session", { key: $("key").value });
    if (r.ok) { $("key").value = ""; signedIn(r.data); }
    else if (r.status === 401) $("signin-error").textContent = "Wrong admin key.";
    else $("signin-error").textContent = message(r);
  } finally { $("signin-button").disabled = false; }
});
$("signout").addEventListener("click", async () => {
  await call("DELETE", "session");
  signedOut();
});

// --- live numbers ------------------------------------------------------
function connect() {
  if (state.live) state.live.close();
  const es = new EventSource("live");
  state.live = es;
  es.addEventListener("tick", (ev) => {
    const t = JSON.parse(ev.data);
    state.rooms = new Map(t.rooms.map((r) => [r.room, r]));
    const live = $("live");
    live.className = "live on";
    live.textContent = "live · " + clock(new Date(t.at));
    if (state.view === "rooms") drawRooms();
    if (state.view === "room") { drawRoomLive(); addHistory(t.at); }
  });
  es.addEventListener("signed_out", () => { es.close(); signedOut(); });
  es.onerror = () => {
    $("live").className = "live off";
    $("live").textContent = "disconnected, retrying…";
    if (es.readyState === EventSource.CLOSED) {
      // The server refused the stream: signed out (the session check below
      // shows the sign-in), or too many console tabs open (429).
      $("live").textContent = "live stream refused (too many console tabs?), retrying in 10 s";
      setTimeout(async () => { const r = await call("GET", "session"); if (r.ok && state.live === es) connect(); }, 10000);
    }
  };
}

// --- router ------------------------------------------------------------
function route() {
  if (!state.csrf) return;
  const h = location.hash || "#/";
  for (const v of ["rooms-view", "room-view", "schedules-view"]) $(v).hidden = true;
  $("nav-rooms").className = ""; $("nav-schedules").className = "";
  let m;
  if ((m = h.match(/^#\/room\/([a-z0-9-]+)$/))) {
    state.view = "room"; $("room-view").hidden = false; $("nav-rooms").className = "here";
    openRoom(m[1]);
  } else if (h === "#/schedules") {
    state.view = "schedules"; $("schedules-view").hidden = false; $("nav-schedules").className = "here";
    openSchedules();
  } else {
    state.view = "rooms"; $("rooms-view").hidden = false; $("nav-rooms").className = "here";
    drawRooms();
    loadBypass();
  }
}
window.addEventListener("hashchange", route);

// --- rooms screen ------------------------------------------------------
// loadBypass lists the edge's bypass rules under the rooms (none: hidden).
async function loadBypass() {
  const r = await call("GET", "api/v1/bypass");
  if (!r.ok) return;
  const rules = (r.data && r.data.rules) || [];
  $("bypass").hidden = rules.length === 0;
  $("bypass-body").replaceChildren(...rules.map((b) => el("tr", {},
    el("td", {}, el("code", {}, b.name)), el("td", {}, b.kind), el("td", { class: "n" }, int(b.passed)))));
}

function drawRooms() {
  const body = $("rooms-body");
  const rows = [...state.rooms.values()];
  $("rooms-count").textContent = rows.length ? "(" + rows.length + ")" : "";
  $("rooms-empty").hidden = rows.length > 0;
  body.replaceChildren(...rows.map((r) => {
    const slow = r.admit_rate_measured < r.admit_rate_current * 0.8 && r.waiting > 0 && r.effective_state === "open";
    const tr = el("tr", { "data-room": r.room },
      el("td", {}, el("a", { href: "#/room/" + r.room }, r.room)),
      el("td", {}, el("span", { class: "state " + r.effective_state }, stateLabel(r.effective_state))),
      el("td", { class: "n", "data-k": "waiting" }, int(r.waiting)),
      el("td", { class: "n" }, int(r.active), el("span", { class: "sub" }, " / " + int(r.max_active))),
      el("td", { class: "n" }, r.waiting > 0 ? el("span", { class: slow ? "warn" : "" }, rate(r.admit_rate_measured)) : el("span", { class: "sub" }, "idle"),
        el("span", { class: "sub" }, " / " + rate(r.admit_rate))),
      el("td", { class: "n" }, r.admission === "adaptive" ? rate(r.admit_rate_current) : el("span", { class: "sub" }, "static")),
      el("td", { class: "n" }, msText(r.origin_p95_ms), r.target_p95_ms ? el("span", { class: "sub" }, " / " + msText(r.target_p95_ms)) : null),
      el("td", { class: "n" }, signedPct(r.eta_error)),
      el("td", { class: "n" }, pct(r.abandonment)));
    tr.addEventListener("click", (ev) => { if (ev.target.tagName !== "A") location.hash = "#/room/" + r.room; });
    return tr;
  }));
}

// --- a room ------------------------------------------------------------
// FIELDS is the settings form, built from the server's settings table
// (GET api/v1/settings) once: [name, kind, label, help, options, fixed].
// The room's state has its own buttons.
let FIELDS = null;
async function loadFields() {
  if (FIELDS) return true;
  const r = await call("GET", "api/v1/settings");
  if (!r.ok) { $("settings-error").textContent = message(r); return false; }
  FIELDS = r.data.settings.filter((f) => f.name !== "state").map((f) => {
    const kind = f.type === "integer" ? "int" : f.type === "number" ? "num" : f.type === "boolean" ? "bool" : f.enum ? "select" : "text";
    const label = f.name.replace(/_(ms|seconds)$/, "").replace(/_/g, " ").replace(/\b(ttl|p95)\b/g, (w) => w.toUpperCase());
    return [f.name, kind, label[0].toUpperCase() + label.slice(1), f.help + (f.unit ? " (" + f.unit + ")" : ""), f.enum, !!f.fixed];
  });
  return true;
}

async function openRoom(room) {
  const changed = state.room !== room;
  state.room = room;
  $("room-name").textContent = room;
  if (changed) {
    state.history = null;
    state.settings = null;
    $("settings").replaceChildren();
    $("events").replaceChildren();
    $("whatif").replaceChildren();
    $("settings-error").textContent = "";
    $("settings-status").textContent = "";
  }
  drawRoomLive();
  const [s, h, fields] = await Promise.all([call("GET", "api/v1/rooms/" + room), call("GET", "rooms/" + room + "/history"), loadFields()]);
  if (state.room !== room) return;
  if (s.ok) { state.settings = s.data; if (fields) drawSettings(); } else { $("settings-error").textContent = message(s); }
  if (h.ok) { state.history = h.data; drawCharts(); }
  loadEvents(true);
}

function drawRoomLive() {
  const r = state.rooms.get(state.room);
  const st = $("room-state");
  if (!r) { st.className = "state"; st.textContent = "unknown"; return; }
  st.className = "state " + r.effective_state;
  st.textContent = stateLabel(r.effective_state) + (r.effective_state !== r.state ? " (set " + stateLabel(r.state) + ")" : "");
  for (const b of document.querySelectorAll(".act")) b.disabled = b.dataset.state === r.state;
  $("t-waiting").textContent = int(r.waiting);
  $("t-active").textContent = int(r.active);
  $("t-max").textContent = "of max " + int(r.max_active);
  $("t-measured").textContent = r.waiting > 0 ? rate(r.admit_rate_measured) : "idle";
  $("t-configured").textContent = "configured " + rate(r.admit_rate);
  $("t-current").textContent = rate(r.admit_rate_current);
  $("t-admission").textContent = r.admission;
  $("t-p95").textContent = msText(r.origin_p95_ms);
  $("t-target").textContent = r.target_p95_ms ? "target " + msText(r.target_p95_ms) : "";
  $("t-eta").textContent = signedPct(r.eta_error);
  $("t-abandon").textContent = pct(r.abandonment);
  $("t-leave").textContent = rate(r.leave_rate) + " left/s";
  $("t-total").textContent = int(r.admitted_total);
  $("t-inventory").textContent = r.inventory !== undefined ? int(r.inventory) + " units left" : "";
  $("f-p95").hidden = r.admission !== "adaptive";
  updateWhatIf();
}

// addHistory appends the live tick to the charts' history (the ring on
// the server has one sample a second too).
function addHistory(at) {
  const h = state.history, r = state.rooms.get(state.room);
  if (!h || !r) return;
  const t = Math.floor(new Date(at).getTime() / 1000);
  if (h.t.length && h.t[h.t.length - 1] >= t) return;
  const push = (k, v) => { h[k].push(v === undefined ? null : v); if (h[k].length > 3600) h[k].shift(); };
  push("t", t); push("waiting", r.waiting); push("active", r.active); push("admit_rate", r.admit_rate);
  push("admit_rate_measured", r.admit_rate_measured); push("admit_rate_current", r.admit_rate_current);
  push("leave_rate", r.leave_rate); push("origin_p95_ms", r.origin_p95_ms); push("eta_error", r.eta_error);
  drawCharts();
}

// --- charts: inline SVG drawn here -------------------------------------
const SVGNS = "http://www.w3.org/2000/svg";
function svg(tag, attrs) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}
function niceMax(x) {
  if (!(x > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(x)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= x) return m * p;
  return x;
}
// chart draws series over t (unix seconds): the last hour, or the time
// since the first sample when there is less (at least two minutes).
function chart(box, t, series) {
  const W = 600, H = 170, L = 54, R = 8, T = 10, B = 22;
  const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img" });
  const now = t.length ? t[t.length - 1] : Date.now() / 1000;
  const span = Math.min(3600, Math.max(120, t.length ? now - t[0] : 0));
  const t0 = now - span;
  let top = 0;
  for (const se of series) for (let i = 0; i < t.length; i++) { const v = se.values[i]; if (v !== null && t[i] >= t0 && v > top) top = v; }
  top = niceMax(top * 1.05);
  const x = (tt) => L + (W - L - R) * (tt - t0) / span;
  const y = (v) => T + (H - T - B) * (1 - v / top);
  for (let i = 0; i <= 4; i++) {
    const v = top * i / 4;
    s.append(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "axis" }));
    const lab = svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" });
    lab.textContent = Number.isInteger(v) ? nf.format(v) : (Math.round(v * 100) / 100).toString();
    s.append(lab);
  }
  for (let i = 0; i <= 4; i++) {
    const ago = span * (4 - i) / 4;
    const lab = svg("text", { x: x(now - ago), y: H - 6, "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle" });
    lab.textContent = ago === 0 ? "now" : ago >= 120 ? "−" + Math.round(ago / 60) + " min" : "−" + Math.round(ago) + " s";
    s.append(lab);
  }
  if (t.length < 2) {
    const e = svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "empty" });
    e.textContent = "collecting: one sample a second";
    s.append(e);
  }
  for (const se of series) {
    let d = "", pen = false;
    for (let i = 0; i < t.length; i++) {
      const v = se.values[i];
      if (v === null || v === undefined || t[i] < t0) { pen = false; continue; }
      d += (pen ? "L" : "M") + x(t[i]).toFixed(1) + " " + y(v).toFixed(1);
      pen = true;
    }
    if (d) s.append(svg("path", { d, fill: "none", stroke: se.color, "stroke-width": se.width || 2, "stroke-dasharray": se.dash || "", "vector-effect": "non-scaling-stroke" }));
  }
  // What a screen reader says of the chart: each series' latest value.
  const latest = (vals) => { for (let i = vals.length - 1; i >= 0; i--) if (vals[i] !== null && vals[i] !== undefined) return vals[i]; return null; };
  s.setAttribute("aria-label", t.length < 2 ? "collecting: one sample a second" : "latest: " + series.map((se) => {
    const v = latest(se.values);
    return se.name + " " + (v === null ? "none" : Number.isInteger(v) ? nf.format(v) : (Math.round(v * 100) / 100).toString());
  }).join(", "));
  const legend = el("div", { class: "legend" });
  for (const se of series) {
    const i = el("i"); i.style.background = se.color;
    legend.append(i, se.name);
  }
  box.replaceChildren(s, legend);
}
function drawCharts() {
  const h = state.history;
  if (!h) return;
  chart($("c-queue"), h.t, [
    { name: "waiting", color: "#1f5fd1", values: h.waiting },
    { name: "active", color: "#13803b", values: h.active },
  ]);
  chart($("c-rate"), h.t, [
    { name: "measured", color: "#1f5fd1", values: h.admit_rate_measured },
    { name: "configured", color: "#5b6270", values: h.admit_rate, dash: "5 4", width: 1.5 },
    { name: "in force", color: "#b46a00", values: h.admit_rate_current, width: 1.5 },
    { name: "left the line", color: "#a4133c", values: h.leave_rate, width: 1.5 },
  ]);
  chart($("c-p95"), h.t, [{ name: "origin p95", color: "#a4133c", values: h.origin_p95_ms }]);
  if (h.t.length) $("history-note").textContent = "History kept by this usher instance since " + clock(new Date(h.t[0] * 1000)) +
    ", one sample a second for an hour; it starts empty after a restart.";
}

// --- state buttons -----------------------------------------------------
const STATE_TEXT = {
  open: ["Open the room?", "Visitors are admitted at the room's rate from now on.", "Open room"],
  paused: ["Pause the room?", "Nobody is admitted until you open it again. Visitors keep their places and new ones may still join the line.", "Pause room"],
  closed: ["Close the room?", "New visitors are refused. Waiting visitors stay until they leave; nobody is admitted.", "Close room"],
  sold_out: ["Mark the room sold out?", "New visitors are refused and waiting visitors are told the sale sold out.", "Mark sold out"],
};
for (const b of document.querySelectorAll(".act")) {
  b.addEventListener("click", () => {
    const target = b.dataset.state, [title, text, ok] = STATE_TEXT[target];
    const r = state.rooms.get(state.room);
    confirmStep(title, [el("p", {}, text), el("p", { class: "muted" }, "Room " + state.room + (r ? ": " + int(r.waiting) + " waiting, " + int(r.active) + " active." : "."))], ok, target,
      async () => putRoom({ state: target }));
  });
}
async function putRoom(body) {
  const room = state.room;
  const r = await call("PUT", "api/v1/rooms/" + room, body);
  if (!r.ok) { $("settings-error").textContent = message(r); return false; }
  $("settings-error").textContent = "";
  $("settings-status").textContent = "Saved at " + clock(new Date());
  if (state.room === room) { state.settings = r.data; if (FIELDS) drawSettings(); }
  return true;
}

// confirmStep shows the confirmation dialog; run is called on OK. While
// it is open the rest of the page is inert and Tab cycles through the
// dialog's controls; closing it gives the focus back to where it was.
function confirmStep(title, body, okText, kind, run) {
  $("confirm-title").textContent = title;
  $("confirm-body").replaceChildren(...body);
  const ok = $("confirm-ok");
  ok.textContent = okText;
  ok.className = "act " + (kind || "");
  const back = document.activeElement;
  for (const m of document.querySelectorAll("body > header, body > main")) m.inert = true;
  $("confirm").hidden = false;
  ok.focus();
  const close = () => {
    $("confirm").hidden = true; ok.onclick = null;
    for (const m of document.querySelectorAll("body > header, body > main")) m.inert = false;
    if (back && back.isConnected) back.focus();
  };
  $("confirm-cancel").onclick = close;
  ok.onclick = async () => { ok.disabled = true; try { await run(); } finally { ok.disabled = false; close(); } };
}
document.addEventListener("keydown", (ev) => {
  if ($("confirm").hidden) return;
  if (ev.key === "Escape") { $("confirm-cancel").click(); return; }
  if (ev.key !== "Tab") return;
  const f = [...$("confirm").querySelectorAll("button, a[href], input, select, textarea")].filter((e) => !e.disabled && e.offsetParent !== null);
  if (!f.length) return;
  const i = f.indexOf(document.activeElement);
  const next = ev.shiftKey ? (i <= 0 ? f.length - 1 : i - 1) : (i < 0 || i === f.length - 1 ? 0 : i + 1);
  ev.preventDefault();
  f[next].focus();
});

// --- settings form -----------------------------------------------------
function drawSettings() {
  const f = $("settings"), s = state.settings;
  f.replaceChildren();
  for (const [name, kind, label, help, options, fixed] of FIELDS) {
    let input;
    const v = s[name];
    if (kind === "bool") {
      input = el("input", { type: "checkbox", name });
      input.checked = !!v;
    } else if (kind === "select") {
      input = el("select", { name }, ...options.map((o) => el("option", { value: o }, o)));
      input.value = v;
    } else {
      input = el("input", { name, type: kind === "text" ? "text" : "number", step: kind === "int" ? "1" : "any", value: v === undefined || v === null ? "" : v });
      if (kind === "text") input.placeholder = "2026-12-24T20:00:00+09:00";
    }
    if (fixed) { input.disabled = true; input.title = "fixed when the room was made"; }
    input.addEventListener("input", () => { markChanged(); updateWhatIf(); });
    input.addEventListener("change", () => { markChanged(); updateWhatIf(); });
    f.append(el("label", { "data-field": name }, label, el("small", {}, help), input));
  }
  if ($("w-session").value === "") $("w-session").value = s.active_ttl_seconds;
  updateWhatIf();
}
function formValue(name, kind) {
  const input = $("settings").elements[name];
  if (!input) return undefined;
  if (kind === "bool") return input.checked;
  if (kind === "int" || kind === "num") return input.value === "" ? NaN : Number(input.value);
  return input.value;
}
function changes() {
  const out = {}, s = state.settings;
  if (!s) return out;
  for (const [name, kind, , , , fixed] of FIELDS || []) {
    if (fixed) continue;
    const v = formValue(name, kind), old = kind === "text" ? (s[name] || "") : s[name];
    if (v !== old && !(Number.isNaN(v) && old === undefined)) out[name] = v;
  }
  return out;
}
function markChanged() {
  const c = changes();
  for (const l of $("settings").querySelectorAll("label")) l.classList.toggle("changed", l.dataset.field in c);
  $("settings-status").textContent = Object.keys(c).length ? Object.keys(c).length + " unsaved change(s)" : "";
}
$("settings").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const c = changes(), s = state.settings;
  const names = Object.keys(c);
  if (!names.length) { $("settings-status").textContent = "No changes."; return; }
  const list = el("ul", { class: "diff" }, ...names.map((n) => el("li", {}, el("code", {}, n), ": ", el("del", {}, String(s[n] ?? "none")), " → ", el("ins", {}, String(c[n])))));
  confirmStep("Apply " + names.length + " change(s) to " + state.room + "?", [list, el("p", { class: "muted" }, "The server checks every value; a refused one changes nothing.")], "Apply", "", async () => {
    for (const n of names) if (Number.isNaN(c[n])) { $("settings-error").textContent = n + ": want a number"; return; }
    await putRoom(c);
  });
});

// --- what-if -----------------------------------------------------------
let whatIfTimer = 0, whatIfKey = "";
function updateWhatIf() {
  if (!state.settings || state.view !== "room") return;
  const r = state.rooms.get(state.room);
  const q = new URLSearchParams({
    waiting: r ? r.waiting : 0,
    admit_rate: formValue("admit_rate", "num"),
    max_active: formValue("max_active", "int"),
    session_seconds: $("w-session").value || state.settings.active_ttl_seconds,
  }).toString();
  if (q === whatIfKey) return;
  whatIfKey = q;
  clearTimeout(whatIfTimer);
  whatIfTimer = setTimeout(async () => {
    const w = await call("GET", "whatif?" + q);
    if (whatIfKey !== q) return;
    $("whatif").replaceChildren(...(w.ok ? w.data.lines.map((l) => el("li", {}, l)) : [el("li", { class: "error" }, message(w))]));
  }, 150);
}
$("w-session").addEventListener("input", updateWhatIf);

// --- event timeline ----------------------------------------------------
async function loadEvents(first) {
  const room = state.room;
  let q = "limit=50";
  if (!first && state.eventsNext) q += "&before=" + encodeURIComponent(state.eventsNext);
  const r = await call("GET", "api/v1/rooms/" + room + "/events?" + q);
  if (state.room !== room) return;
  const list = $("events");
  if (first) list.replaceChildren();
  if (r.status === 404 || (r.ok && first && !(r.data.events || []).length)) {
    list.replaceChildren(el("li", { class: "muted" }, "no events recorded"));
    $("events-more").hidden = true;
    return;
  }
  if (!r.ok) { list.replaceChildren(el("li", { class: "error" }, message(r))); return; }
  for (const e of r.data.events || []) {
    const at = new Date(e.at);
    const data = eventSummary(e);
    list.append(el("li", {}, el("time", { datetime: e.at, title: e.at }, clock(at)), el("b", {}, e.type),
      el("span", {}, e.visitor ? el("span", { class: "sub" }, e.visitor + " ") : null, el("code", {}, data))));
  }
  state.eventsNext = r.data.next || "";
  $("events-more").hidden = !state.eventsNext;
}
$("events-more").addEventListener("click", () => loadEvents(false));

// eventSummary is an event's data in a line: for settings_changed, who
// changed what ("by admin: state open → paused"), not the whole settings.
function eventSummary(e) {
  const d = e.data || {};
  const show = (v) => v === undefined ? "–" : typeof v === "string" ? v : JSON.stringify(v);
  if (e.type === "settings_changed" && (d.old || d.new)) {
    const old = d.old || {}, now = d.new || {};
    const keys = [...new Set([...Object.keys(old), ...Object.keys(now)])];
    const changed = keys.filter((k) => JSON.stringify(old[k]) !== JSON.stringify(now[k]))
      .map((k) => k + " " + show(old[k]) + " → " + show(now[k]));
    return (d.who ? "by " + d.who + ": " : "") + (changed.length ? changed.join(", ") : "no change");
  }
  return Object.entries(d).map(([k, v]) => k + " " + show(v)).join(", ");
}

// --- schedules ---------------------------------------------------------
// The sales change while the screen is open: its first page is read again
// every 5 s while it is shown (a failed read too), until "more" adds pages.
let schedulesTimer = 0;
async function openSchedules(more) {
  $("schedules-none").hidden = state.booking;
  $("schedules-table").hidden = !state.booking;
  if (!state.booking) { $("schedules-more").hidden = true; return; }
  clearTimeout(schedulesTimer);
  state.schedulesPaged = !!more;
  try {
    await loadSchedules(more);
  } finally {
    if (!state.schedulesPaged) {
      schedulesTimer = setTimeout(() => { if (state.view === "schedules" && !state.schedulesPaged) openSchedules(false); }, 5000);
    }
  }
}

async function loadSchedules(more) {
  let q = "limit=50";
  if (more && state.schedulesNext) q += "&after=" + encodeURIComponent(state.schedulesNext);
  const [r, c] = await Promise.all([call("GET", "api/v1/schedules?" + q), more ? null : call("GET", "api/v1/concerts?limit=500")]);
  if (c && c.ok) state.concerts = new Map(c.data.concerts.map((x) => [x.concert_id, x.title]));
  const body = $("schedules-body");
  if (!more) body.replaceChildren();
  if (!r.ok) { body.replaceChildren(el("tr", {}, el("td", { colspan: 8, class: "error" }, message(r)))); return; }
  const list = r.data.schedules || [];
  $("schedules-empty").hidden = !!list.length || !!more;
  state.schedulesNext = r.data.next || "";
  $("schedules-more").hidden = !state.schedulesNext;
  const sales = await Promise.all(list.map((s) => call("GET", "api/v1/schedules/" + s.schedule_id + "/sales")));
  list.forEach((s, i) => {
    const sa = sales[i].ok ? sales[i].data : {};
    const title = state.concerts && state.concerts.get(s.concert_id);
    body.append(el("tr", { "data-schedule": s.schedule_id },
      el("td", {}, "#" + s.schedule_id),
      el("td", {}, title || "concert " + s.concert_id),
      el("td", {}, new Date(s.starts_at).toLocaleString("en-GB")),
      el("td", {}, el("a", { href: "#/room/" + s.room }, s.room)),
      el("td", { class: "n" }, int(sa.sold)), el("td", { class: "n" }, int(sa.held)),
      el("td", { class: "n" }, int(sa.available)), el("td", { class: "n" }, sa.revenue !== undefined ? int(sa.revenue) : "–")));
  });
}
$("schedules-more").addEventListener("click", () => openSchedules(true));

start();
