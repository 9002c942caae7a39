package gateway

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/testenv"
	"usher/internal/wire"
)

// TestLangLinkBrowser: in Chromium, a language link (a plain link, no
// script) brings the page back in that language, with its lang attribute,
// and the page's polls keep it.
func TestLangLinkBrowser(t *testing.T) {
	e := browserEnv(t)
	ctx := newBrowser(t)
	navigate(t, ctx, e.url+"/shop")
	waitText(t, ctx, "position", "1")
	if _, err := chromedp.Run(ctx, chromedp.Click(chromedp.CSS(`a[hreflang="zh-Hant"]`))); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "title", "尚未開始售票")
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.lang + " " + document.documentElement.dir + " " + document.querySelector("[aria-current]").textContent`))
	if err != nil || got != "zh-Hant ltr 繁體中文" {
		t.Errorf("after the 繁體中文 link: %q, %v; want zh-Hant ltr with 繁體中文 current", got, err)
	}
	waitText(t, ctx, "ahead", "您前面還有 0 人")
}

// TestAxeWaitingPageLanguages audits the waiting page in every shipped
// language (waiting, with the problem notice and the no-script link shown,
// and the pre-queue), and checks its lang and dir.
func TestAxeWaitingPageLanguages(t *testing.T) {
	axe := testenv.Axe(t)
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{})
	p, err := New(Config{Origin: mustURL(t, e.url), Queue: e.q, Keys: e.keys, Registry: prometheus.NewRegistry(), Rules: Rules{DefaultRoom: "sale"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httpServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		r.Header.Set("Accept-Language", q.Get("hl"))
		pg := Page{State: q.Get("state"), Room: "sale", Position: 3, Ahead: 2, StartPosition: 5, Progress: 50,
			ETA: entryETA(p.textFor(r, "sale"), wire.Entry{ETASeconds: 300}), ETASeconds: 300, PollAfterMS: 600_000}
		if pg.State == StatePreQueue {
			pg.Position, pg.Ahead, pg.OpensAt = 0, 0, time.Now().Add(time.Hour)
		}
		p.renderPage(w, r, http.StatusTooManyRequests, pg)
	}))
	ctx := newBrowser(t)
	for _, lang := range Languages {
		for _, state := range []string{StateWaiting, StatePreQueue} {
			navigate(t, ctx, srv+"/shop?"+url.Values{"hl": {lang}, "state": {state}}.Encode())
			waitState(t, ctx, state)
			got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.lang + " " + document.documentElement.dir`))
			if err != nil || got != lang+" ltr" {
				t.Errorf("%s, %s: lang and dir %q, %v", lang, state, got, err)
			}
			if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("problem").hidden = false; document.querySelectorAll("noscript").forEach(n => n.outerHTML = n.textContent); true`)); err != nil {
				t.Fatal(err)
			}
			testenv.Audit(t, ctx, axe, lang+", "+state)
		}
	}
}
