package gateway

import (
	"net/url"
	"testing"

	"usher/internal/edgeconf"
	"usher/internal/queue"
	"usher/internal/testenv"
)

// TestBrowserThroughNginx walks two visitors in Chromium through real
// nginx, configured as `usher auth --print nginx` renders it, with Auth
// behind it: the waiting page comes through nginx's error_page, its polls
// go through auth_request, and at the opening the first visitor lands on
// the page first asked for while the second moves up without a reload.
func TestBrowserThroughNginx(t *testing.T) {
	testenv.NginxBin(t)
	e := newAuthEnv(t, Rules{})
	runPausedSale(t, e.q)

	origin, err := url.Parse(newOrigin(t, shopOrigin))
	if err != nil {
		t.Fatal(err)
	}
	conf, err := edgeconf.Nginx(edgeconf.Config{
		Listen: testenv.ClosedAddr(t), Origin: origin.String(), Usher: e.url,
		Dir: t.TempDir(), InsecureCookies: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	base := testenv.Nginx(t, conf)

	first := newBrowser(t)
	navigate(t, first, base+"/shop?item=42")
	waitText(t, first, "position", "1")
	waitText(t, first, "title", "The sale has not started yet")
	second := newBrowserContext(t, first)
	navigate(t, second, base+"/shop")
	waitText(t, second, "position", "2")
	screenshot(t, second, "waiting-through-nginx-phone.png")

	setState(t, e.q, "sale", queue.Open)
	waitText(t, first, "origin", "Welcome to the shop")
	waitText(t, first, "uri", "/shop?item=42")
	waitText(t, second, "position", "1")
	waitText(t, second, "title", "You are in line")
}
