// usher waiting page: polls the gated URL for the JSON waiting protocol and
// goes on to it once it is no longer answered with 429. In the challenge
// state it first solves the proof of work in a Web Worker and asks the URL
// again with the solution, which takes the place and sets the cookies.
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

  // clock shows seconds as "1:02:03" or "2:03" (Page.Countdown).
  function clock(secs) {
    secs = Math.max(0, Math.round(secs));
    var h = Math.floor(secs / 3600), m = Math.floor(secs / 60) % 60, x = secs % 60;
    var mm = h > 0 && m < 10 ? "0" + m : String(m);
    return (h > 0 ? h + ":" : "") + mm + ":" + (x < 10 ? "0" : "") + x;
  }
  // The pre-queue counts down between polls, from the ETA of the last one.
  var opensAt = Date.now() + (s.eta_seconds || 0) * 1000;
  function tick() {
    setText("countdown", clock((opensAt - Date.now()) / 1000));
    if (opensAt > Date.now()) setTimeout(tick, 1000 - Date.now() % 1000);
  }

  function render(st) {
    if (st.state === "closed" || st.state === "sold_out") { go(); return; } // the server shows that page
    var pre = st.room_state === "pre_queue" && st.position === 0;
    if (pre !== (s.state === "pre_queue")) { go(); return; } // the opening drew: the server shows the place
    if (pre) { opensAt = Date.now() + st.eta_seconds * 1000; tick(); return; }
    start = Math.max(start, st.position);
    var paused = st.room_state === "paused" || st.room_state === "pre_queue";
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

  // solve runs the proof-of-work worker, then asks the URL with the
  // solution (header Usher-Challenge, package pow). The answer takes the
  // place and sets the cookies; the page then goes to the URL, which shows
  // the place (or the site itself, if admitted at once).
  function solve() {
    var c = s.challenge, expected = Math.pow(2, c.bits), w;
    try { w = new Worker(s.worker); } catch (e) { return refused(); }
    w.onerror = function () { w.terminate(); refused(); };
    w.onmessage = function (ev) {
      var m = ev.data;
      if (m.error) { w.terminate(); return refused(); }
      var p = el("work");
      p.value = Math.min(99, Math.floor(m.tried * 100 / expected));
      p.textContent = p.value + " %";
      setText("work-count", fmt(t.challenge_count, m.tried, expected));
      if (m.nonce === undefined) return;
      w.terminate();
      fetch(s.url, {
        headers: { "Accept": "application/json", "Usher-Challenge": c.token + ":" + m.nonce },
        cache: "no-store" // fetch sends and keeps this site's cookies by default
      }).then(function (res) {
        if (res.status === 401 || res.status === 428) return refused(); // wrong, spent or expired
        if (res.status !== 429) return go();
        // 429: a place (the waiting protocol), or rate_limited (no place yet).
        var ra = parseInt(res.headers.get("Retry-After"), 10);
        return res.json().then(function (b) {
          if (!b.error) return go();
          setTimeout(go, jitter(ra > 0 ? ra * 1000 : 2000));
        });
      }).catch(refused);
    };
    w.postMessage({ token: c.token, bits: c.bits });
  }
  // refused shows the error state; its link asks the URL again, which
  // brings a new challenge.
  function refused() {
    el("usher").setAttribute("data-state", "error");
    setText("title", t.error_title);
    el("work-failed").hidden = false;
  }

  if (s.state === "challenge") {
    solve();
  } else if (s.state === "waiting" || s.state === "paused" || s.state === "pre_queue") {
    if (s.state === "pre_queue") tick();
    setTimeout(poll, jitter(s.poll_after_ms > 0 ? s.poll_after_ms : 2000));
  } else if (s.state === "error" || s.state === "full") {
    setTimeout(go, jitter(s.poll_after_ms > 0 ? s.poll_after_ms : 2000));
  }
})();
