package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/chromedp/chromedp"

	"usher/internal/axe"
	"usher/internal/gateway"
)

// pageCheck runs usher page check DIR: it checks an operator's page
// directory as the edges do at start and, given axe-core, audits its
// waiting page in headless Chromium: the waiting state in every language,
// and every state in English, for the directory and each room of its own.
// Any refusal or violation fails it.
func pageCheck(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	const use = "usage: usher page check [flags] DIR"
	switch {
	case len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help"):
		fmt.Fprintln(stdout, use)
		return nil
	case len(args) == 0 || args[0] != "check":
		fmt.Fprintln(stderr, use)
		return errors.New("page: want the subcommand check")
	}
	args = args[1:]
	f := newFlags("page check", getenv, stderr)
	f.own("page")
	axePath := f.string("axe", "", "axe-core's axe.min.js (npm install axe-core): audit the page in headless Chromium; without it only the files are checked")
	chromium := f.string("chromium", "chromium", "the Chromium binary of the audit")
	tmpl := f.string("waiting-template", "", "an operator's html/template to check with the directory, as the edges' --waiting-template")
	timeout := f.duration("timeout", 5*time.Minute, "most time for the whole audit")
	f.Usage = func() {
		fmt.Fprintln(f.Output(), use)
		f.PrintDefaults()
	}
	var dir string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		dir, args = args[0], args[1:]
	} else if n := len(args); n > 0 && !strings.HasPrefix(args[n-1], "-") {
		dir, args = args[n-1], args[:n-1]
	}
	if err := f.parse(args); err != nil {
		return err
	}
	if dir == "" {
		fmt.Fprintln(stderr, use)
		return errors.New("page check: no directory given")
	}
	pages, err := gateway.LoadPages(dir, *tmpl, nil, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: the files are valid\n", dir)
	if *axePath == "" {
		fmt.Fprintln(stdout, "accessibility audit skipped: give --axe node_modules/axe-core/axe.min.js")
		return nil
	}
	script, err := axe.Script(*axePath)
	if err != nil {
		return err
	}
	bin, err := axe.Chromium(*chromium)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	return auditPages(ctx, pages, script, bin, stdout)
}

// auditPages serves pages' samples on loopback and audits each.
func auditPages(ctx context.Context, pages *gateway.Pages, script, chromium string, stdout io.Writer) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if err := pages.Render(w, q.Get("room"), q.Get("lang"), q.Get("state")); err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
		}
	})}
	go srv.Serve(ln)
	defer srv.Close()
	profile, err := os.MkdirTemp("", "usher-page-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(profile)
	tab, closeBrowser, err := axe.Browser(ctx, chromium, profile)
	if err != nil {
		return err
	}
	defer closeBrowser()
	type page struct{ room, lang, state string }
	var list []page
	for _, room := range append([]string{""}, pages.Rooms()...) {
		for _, l := range gateway.Languages {
			list = append(list, page{room, l, gateway.StateWaiting})
		}
		for _, s := range gateway.PageStates[1:] {
			list = append(list, page{room, gateway.Languages[0], s})
		}
	}
	bad := 0
	for _, p := range list {
		what := p.lang + ", " + p.state
		if p.room != "" {
			what = "room " + p.room + ", " + what
		}
		q := url.Values{"room": {p.room}, "lang": {p.lang}, "state": {p.state}}
		if err := chromedp.Do(tab, chromedp.Navigate("http://"+ln.Addr().String()+"/?"+q.Encode())); err != nil {
			return fmt.Errorf("audit %s: %w", what, err)
		}
		vs, err := axe.Audit(tab, script)
		if err != nil {
			return fmt.Errorf("audit %s: %w", what, err)
		}
		for _, v := range vs {
			fmt.Fprintf(stdout, "%s: %s\n", what, v)
		}
		bad += len(vs)
	}
	if bad > 0 {
		return fmt.Errorf("accessibility audit: %d violations on %d pages", bad, len(list))
	}
	fmt.Fprintf(stdout, "accessibility audit: %d pages (the waiting state in every language, every state in %s, for the directory and each of its %d rooms), no violations\n",
		len(list), gateway.Languages[0], len(pages.Rooms()))
	return nil
}
