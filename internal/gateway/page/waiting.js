// usher waiting page: polls the gated URL for the JSON waiting protocol and
// goes on to it once it is no longer answered with 429.
(function () {
  "use strict";
  var el = function (id) { return document.getElementById(id); };
  var s = JSON.parse(el("usher-state").textContent);
  var t = s.text;
  var start = s.start_position || s.position;
  var failures = 0;

  function fmt(f) {
    var args = Array.prototype.slice.call(arguments, 1);
    return f.replace(/%d/g, function () { return String(args.shift()); });
  }
  // eta shows the wait's range (eta_range_seconds) in whole minutes, as the
  // server renders it (entryETA); without one, the ETA ± 20 %.
  function eta(secs, r) {
    if ((r ? r[1] : secs) < 60) return t.eta_less;
    var lo = Math.max(1, Math.floor((r ? r[0] : secs * 0.8) / 60));
    var hi = Math.ceil((r ? r[1] : secs * 1.2) / 60);
    return hi <= lo ? fmt(t.eta_about, lo) : fmt(t.eta_range, lo, hi);
  }
  function setText(id, v) { var e = el(id); if (e && e.textContent !== v) e.textContent = v; }
  function jitter(ms) { return Math.max(250, ms * (0.8 + 0.4 * Math.random())); }
  function go() { window.location.replace(s.url); }

  function render(st) {
    if (st.state === "closed" || st.state === "sold_out") { go(); return; } // the server shows that page
    start = Math.max(start, st.position);
    var paused = st.room_state === "paused";
    document.getElementById("usher").setAttribute("data-state", paused ? "paused" : "waiting");
    setText("title", paused ? t.paused_title : t.title);
    el("paused").hidden = !paused;
    el("eta-line").hidden = paused;
    setText("position", String(st.position));
    setText("ahead", fmt(st.ahead === 1 ? t.ahead_one : t.ahead_many, st.ahead));
    setText("eta", eta(st.eta_seconds, st.eta_range_seconds));
    var p = el("progress");
    var pct = start > 1 && st.position < start ? Math.floor((start - Math.max(1, st.position)) * 100 / (start - 1)) : 0;
    p.value = pct; p.textContent = pct + " %";
    var now = new Date();
    var u = el("updated");
    u.setAttribute("datetime", now.toISOString());
    u.textContent = now.toISOString().slice(11, 19) + " UTC"; // as the server renders it
  }

  function poll() {
    var xhr = new XMLHttpRequest();
    xhr.open("GET", s.url);
    xhr.setRequestHeader("Accept", "application/json");
    xhr.onload = function () {
      if (xhr.status !== 429) { go(); return; } // admitted (or an error page to show)
      failures = 0;
      el("problem").hidden = true;
      var st;
      try { st = JSON.parse(xhr.responseText); } catch (e) { return fail(); }
      render(st);
      var ms = st.poll_after_ms;
      var ra = parseInt(xhr.getResponseHeader("Retry-After"), 10);
      if (!(ms > 0) && ra > 0) ms = ra * 1000;
      setTimeout(poll, jitter(ms > 0 ? ms : 2000));
    };
    xhr.onerror = fail;
    xhr.send();
  }
  function fail() {
    failures++;
    el("problem").hidden = false;
    setTimeout(poll, jitter(Math.min(30000, 2000 * Math.pow(2, failures - 1))));
  }

  if (s.state === "waiting" || s.state === "paused") {
    setTimeout(poll, jitter(s.poll_after_ms > 0 ? s.poll_after_ms : 2000));
  } else if (s.state === "error") {
    setTimeout(go, jitter(2000));
  }
})();
