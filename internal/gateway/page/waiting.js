// usher waiting page: polls the gated URL for the JSON waiting protocol and
// shows every change in place, announced in the polite live region
// #announce; it never reloads the page. It goes on to the URL once the
// answer is the site itself (the visitor's turn: the navigation the visitor
// came for). Near the front its polls ask to be held until the turn
// (Usher-Wait), so the turn arrives at once; when it does while the tab is
// hidden, the page says so (title, an optional sound, vibration, a browser
// notification the visitor asked for with its button) and shows the time
// left to continue, going on when the visitor comes back (or just before
// the time runs out). In the challenge state it first solves the proof of work in a
// Web Worker and asks the URL again with the solution, which takes the
// place and sets the cookies.
(function () {
  "use strict";
  var el = function (id) { return document.getElementById(id); };
  var s = JSON.parse(el("usher-state").textContent);
  var t = s.text;
  var start = s.start_position || s.position;
  var failures = 0;
  var view = s.state, position = s.position;
  var lastETA = s.eta_seconds || 0, lastETAAt = Date.now();

  function fmt(f) {
    var args = Array.prototype.slice.call(arguments, 1);
    return f.replace(/%d/g, function () { return String(args.shift()); });
  }
  function setText(id, v) { var e = el(id); if (e && e.textContent !== v) e.textContent = v; }
  function hide(id, hidden) { var e = el(id); if (e) e.hidden = hidden; }
  function jitter(ms) { return Math.max(250, ms * (0.8 + 0.4 * Math.random())); }
  function go() { window.location.replace(s.url); }
  // announce says text in the polite live region (screen readers read it
  // when the visitor is idle).
  function announce(text) { setText("announce", text); }

  var titles = {
    waiting: t.title, paused: t.paused_title, pre_queue: t.pre_queue_title, draw: t.draw_title, closed: t.closed_title,
    sold_out: t.sold_out_title, full: t.full_title, error: t.error_title, challenge: t.challenge_title,
    turn: t.turn_title
  };
  var messages = {
    paused: t.paused, closed: t.closed, sold_out: t.sold_out, full: t.full, error: t.error, challenge: t.challenge
  };
  // show switches the page to state v in place; it reports whether the
  // state changed.
  function show(v) {
    if (v === view) return false;
    view = v;
    el("usher").setAttribute("data-state", v);
    setText("title", titles[v]);
    document.title = titles[v];
    var m = el("message") || el("paused");
    if (m) { m.hidden = !messages[v]; if (messages[v]) setText(m.id, messages[v]); }
    hide("opens", v !== "pre_queue" && v !== "draw");
    hide("place", v !== "waiting" && v !== "paused");
    hide("eta-line", v !== "waiting");
    if (v !== "waiting") hide("slower", true);
    hide("challenge", v !== "challenge");
    hide("retry", v !== "error" && v !== "full");
    hide("turn", v !== "turn");
    return true;
  }

  // clock shows seconds as "1:02:03" or "2:03" (Page.Countdown).
  function clock(secs) {
    secs = Math.max(0, Math.round(secs));
    var h = Math.floor(secs / 3600), m = Math.floor(secs / 60) % 60, x = secs % 60;
    var mm = h > 0 && m < 10 ? "0" + m : String(m);
    return (h > 0 ? h + ":" : "") + mm + ":" + (x < 10 ? "0" : "") + x;
  }
  // The pre-queue counts down between polls, from the ETA of the last one.
  var opensAt = Date.now() + (s.eta_seconds || 0) * 1000, ticking = false;
  function tick() {
    setText("countdown", clock((opensAt - Date.now()) / 1000));
    ticking = (view === "pre_queue" || view === "draw") && opensAt > Date.now();
    if (ticking) setTimeout(tick, 1000 - Date.now() % 1000);
  }

  // render shows an entry of the JSON protocol; it reports whether to poll
  // again.
  function render(st) {
    if (st.state === "closed" || st.state === "sold_out") {
      if (show(st.state)) announce(titles[st.state] + ". " + messages[st.state]);
      return false;
    }
    if ((st.room_state === "pre_queue" || st.room_state === "draw") && st.position === 0) {
      opensAt = Date.now() + st.eta_seconds * 1000;
      if (show(st.room_state)) announce(titles[st.room_state]);
      if (!ticking) tick();
      return true;
    }
    if (st.state !== "waiting") return true; // admitted: the next request goes through
    var was = view;
    var changed = show(st.room_state === "paused" || st.room_state === "pre_queue" ? "paused" : "waiting");
    start = Math.max(start, st.position);
    setText("position", String(st.position));
    var ahead = st.ahead_text || String(st.ahead); // the server's words, in its plural form
    setText("ahead", ahead);
    if (st.eta_text) setText("eta", st.eta_text); // the server's words (entryETA)
    // The wait counts down between answers; one that grew by more than
    // half a minute and a tenth says why (the line slowed down).
    var at = Date.now(), expected = lastETA - (at - lastETAAt) / 1000;
    var grew = was === "waiting" && view === "waiting" && lastETA > 0 && st.eta_seconds > expected + Math.max(30, expected / 10);
    var sl = el("slower"), slowed = grew && sl !== null && sl.hidden;
    hide("slower", !grew);
    lastETA = st.eta_seconds;
    lastETAAt = at;
    var p = el("progress");
    var pct = start > 1 && st.position < start ? Math.floor((start - Math.max(1, st.position)) * 100 / (start - 1)) : 0;
    if (p) { p.value = pct; p.textContent = pct + " %"; }
    var now = new Date();
    var u = el("updated");
    if (u) {
      u.setAttribute("datetime", now.toISOString());
      u.textContent = now.toISOString().slice(11, 19) + " UTC"; // as the server renders it
    }
    if (st.position !== position) {
      var pe = el("position");
      if (pe && position > 0) { pe.classList.remove("moved"); void pe.offsetWidth; pe.classList.add("moved"); }
    }
    if (changed || st.position !== position || slowed) {
      announce((changed ? titles[view] + ". " : "") + t.position + ": " + st.position + ". " + ahead + "." + (slowed ? " " + t.slower : ""));
    }
    position = st.position;
    return true;
  }

  // answer handles the answer to a poll: the place (429 with an entry),
  // the room's end (409/410 with an entry), the gateway's own refusal or
  // failure (an error object: try again later), or anything else, which
  // is the site: the visitor's turn.
  function answer(status, body, retryAfter, ttl) {
    var b = null;
    try { b = JSON.parse(body); } catch (e) { /* not the protocol: the site */ }
    if (b && b.error) {
      if (status >= 500) return fail();
      if (status === 428) { go(); return; } // the place is gone; a new one needs a challenge
      next(retryAfter > 0 ? retryAfter * 1000 : 2000);
      return;
    }
    if (b && b.state && (status === 429 || status === 409 || status === 410)) {
      failures = 0;
      hide("problem", true);
      if (render(b)) next(b.poll_after_ms > 0 ? b.poll_after_ms : retryAfter > 0 ? retryAfter * 1000 : 2000);
      return;
    }
    turn(ttl);
  }

  // The visitor's opt-ins: a sound (its checkbox makes the AudioContext,
  // a gesture browsers require) and a notification (asked for only when
  // its button is pressed; remembered for the tab's session).
  var audio = null, notifyOn = false;
  try { notifyOn = sessionStorage.getItem("usher-notify") === "1"; } catch (e) { /* storage off */ }
  function setupAlerts() {
    var snd = el("sound"), nb = el("notify");
    if (!snd || !nb) return;
    hide("alerts", false);
    snd.addEventListener("change", function () {
      if (!snd.checked || audio) return;
      try { audio = new (window.AudioContext || window.webkitAudioContext)(); } catch (e) { audio = null; }
    });
    var can = "Notification" in window && Notification.permission !== "denied";
    var on = function () { hide("notify", true); hide("notify-on", false); };
    if (notifyOn && can && Notification.permission === "granted") on(); else hide("notify", !can);
    nb.addEventListener("click", function () {
      Notification.requestPermission().then(function (p) {
        if (p !== "granted") { hide("notify", true); return; }
        notifyOn = true;
        try { sessionStorage.setItem("usher-notify", "1"); } catch (e) { /* storage off */ }
        on();
        announce(t.notify_on);
      });
    });
  }
  function beep() {
    if (!audio || !el("sound").checked) return;
    try {
      var o = audio.createOscillator(), g = audio.createGain();
      o.frequency.value = 880;
      g.gain.value = 0.2;
      o.connect(g);
      g.connect(audio.destination);
      o.start();
      o.stop(audio.currentTime + 0.4);
    } catch (e) { /* no sound */ }
  }

  // turn: the answer was the site itself, so the visitor is admitted and
  // its slot claimed for ttl seconds (Usher-Pass-TTL). A visible tab goes
  // on at once; a hidden one tells the visitor and goes on when it comes
  // back, when it presses Continue (or the notification), or 5 s before
  // the slot would lapse.
  function turn(ttl) {
    document.title = t.turn_title;
    beep();
    if (navigator.vibrate) { try { navigator.vibrate([200, 100, 200]); } catch (e) { /* none */ } }
    if (document.visibilityState !== "hidden" || !(ttl > 5)) { go(); return; }
    show("turn");
    var until = Date.now() + ttl * 1000, left = function () { return t.turn_left.replace("%s", clock((until - Date.now()) / 1000)); };
    announce(t.turn_title + ". " + left());
    if (notifyOn && "Notification" in window && Notification.permission === "granted") {
      try {
        var n = new Notification(t.turn_title, { body: left(), tag: "usher-turn" });
        n.onclick = function () { window.focus(); go(); };
      } catch (e) { /* notifications off */ }
    }
    document.addEventListener("visibilitychange", function () { if (document.visibilityState === "visible") go(); });
    (function count() {
      if (until - Date.now() <= 5000) { go(); return; }
      setText("turn-left", left());
      setTimeout(count, 1000 - Date.now() % 1000);
    })();
  }
  function next(ms) { setTimeout(poll, jitter(ms)); }

  function poll() {
    var xhr = new XMLHttpRequest();
    xhr.open("GET", s.url);
    xhr.setRequestHeader("Accept", "application/json");
    // Near the front the answer is held until the turn (at most 10 s).
    xhr.setRequestHeader("Usher-Wait", "10");
    // The place shown: usher never answers one further back on this ticket.
    if (position > 0) xhr.setRequestHeader("Usher-Shown", String(position));
    xhr.onload = function () {
      answer(xhr.status, xhr.responseText, parseInt(xhr.getResponseHeader("Retry-After"), 10),
        parseInt(xhr.getResponseHeader("Usher-Pass-TTL"), 10));
    };
    xhr.onerror = fail;
    xhr.send();
  }
  function fail() {
    failures++;
    hide("problem", view === "error"); // the error state says it already
    setTimeout(poll, jitter(Math.min(30000, 2000 * Math.pow(2, failures - 1))));
  }

  // solve runs the proof-of-work worker, then asks the URL with the
  // solution (header Usher-Challenge, package pow). The answer takes the
  // place and sets the cookies; the page then shows the place (or goes to
  // the site itself, if admitted at once).
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
        return res.text().then(function (body) {
          var b = null;
          try { b = JSON.parse(body); } catch (e) { /* the site */ }
          if (b && b.error) return refused(); // rate_limited: no place yet
          answer(res.status, body, parseInt(res.headers.get("Retry-After"), 10), parseInt(res.headers.get("Usher-Pass-TTL"), 10));
        });
      }).catch(refused);
    };
    w.postMessage({ token: c.token, bits: c.bits });
  }
  // refused shows the error state; its link asks the URL again, which
  // brings a new challenge.
  function refused() {
    show("error");
    setText("message", t.challenge_failed);
    announce(t.error_title + ". " + t.challenge_failed);
  }

  setupAlerts();
  if (s.state === "challenge") {
    solve();
  } else if (s.state === "waiting" || s.state === "paused" || s.state === "pre_queue" || s.state === "draw" || s.state === "error" || s.state === "full") {
    if (s.state === "pre_queue" || s.state === "draw") tick();
    next(s.poll_after_ms > 0 ? s.poll_after_ms : 2000);
  }
})();
