package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"usher/internal/gateway"
	"usher/internal/httpapi"
	"usher/internal/queue"
)

// gateFlags are the flags of the two edges, usher proxy and usher auth: the
// path rules, the waiting page and the bounds on what a client sends.
type gateFlags struct {
	room, lang, waitingTemplate *string
	pageDir                     *string
	gates, opens, routes        *[]string
	publicHosts                 *[]string
	bypassCIDRs                 *[]string
	bypassSecrets               *string
	bodyTimeout                 *time.Duration
	foldCase                    *bool
	conns                       connFlags
}

// addGateFlags defines them on f; edge names the command in their help.
func addGateFlags(f *flags, edge string) gateFlags {
	return gateFlags{
		room:            f.string("room", "sale", "room of paths no --route maps"),
		gates:           f.stringList("gate", "gated path pattern, repeatable (default /: everything); longest pattern wins"),
		opens:           f.stringList("open", "always-open path pattern, repeatable, such as /static/ or /healthz"),
		lang:            f.string("lang", gateway.LangAuto, "waiting page language: auto (each visitor's choice or Accept-Language, English fallback), auto:<lang> (another fallback), or one language for every visitor: "+strings.Join(gateway.Languages, ", ")),
		waitingTemplate: f.string("waiting-template", "", "operator's html/template for the waiting page (see docs/proxy.md)"),
		pageDir:         f.string("page-dir", "", "directory of the waiting page's brand.json, waiting.html and text/<lang>.json, reloaded on a change (see docs/operations.md; check it with usher page check)"),
		routes:          f.stringList("route", "path prefix → room, repeatable, such as /concert-a/=room-a; longest prefix wins"),
		conns:           addConnFlags(f, 10*time.Second),
		bodyTimeout:     f.duration("body-timeout", time.Minute, "most time to read a request's body, whatever its headers"),
		publicHosts:     f.stringList("public-host", "host the "+edge+" serves, repeatable, such as tickets.example.com; others get 421, and only then is the client's Host sent to the origin (X-Forwarded-Host)"),
		bypassCIDRs:     f.stringList("bypass-cidr", "client address or CIDR prefix that passes gated paths without a place (a monitoring probe, a partner system), repeatable, such as 10.1.0.0/16; the address --trusted-proxies derives"),
		bypassSecrets:   f.string("bypass-secrets", "", "file of lines NAME SECRET: a request whose Usher-Bypass header is one of the secrets (32 characters or more) passes gated paths without a place"),
		foldCase:        f.bool("fold-case", false, "match path rules without regard to case or Unicode form, for origins that ignore case (IIS); otherwise a path whose case or form changes the rule is refused"),
	}
}

// check records the bad values in f.
func (g gateFlags) check(f *flags) {
	g.conns.check(f)
	f.positive("body-timeout", g.bodyTimeout.Seconds())
	// Checked again when the edge is built; here so that a bad page
	// stops the start before anything is written.
	if _, err := gateway.LoadPages(*g.pageDir, *g.waitingTemplate, nil, nil); err != nil {
		f.errs = append(f.errs, fmt.Sprintf("--page-dir/%s or --waiting-template/%s: %v", f.envName("page-dir"), f.envName("waiting-template"), err))
	}
}

// rules parses the path rules.
func (g gateFlags) rules(f *flags) (gateway.Rules, error) {
	rules := gateway.Rules{DefaultRoom: *g.room, Gate: *g.gates, Open: *g.opens, FoldCase: *g.foldCase}
	for _, s := range *g.routes {
		r, err := gateway.ParseRoute(s)
		if err != nil {
			return rules, fmt.Errorf("bad setting: --route/%s: %w", f.envName("route"), err)
		}
		rules.Routes = append(rules.Routes, r)
	}
	if err := rules.Validate(); err != nil {
		return rules, fmt.Errorf("bad path rules: %w", err)
	}
	seen := map[string]bool{}
	for _, c := range *g.bypassCIDRs {
		b, err := gateway.ParseBypassCIDR(c)
		if err != nil || seen[b.Name] {
			return rules, fmt.Errorf("bad setting: --bypass-cidr/%s=%q: want distinct addresses or CIDR prefixes, as in 10.1.0.0/16", f.envName("bypass-cidr"), c)
		}
		seen[b.Name] = true
		rules.Bypass = append(rules.Bypass, b)
	}
	if *g.bypassSecrets != "" {
		secrets, err := gateway.LoadBypassSecrets(*g.bypassSecrets)
		if err != nil {
			return rules, fmt.Errorf("bad setting: --bypass-secrets/%s: %w", f.envName("bypass-secrets"), err)
		}
		rules.Bypass = append(rules.Bypass, secrets...)
	}
	return rules, nil
}

// config is the gateway's configuration for these flags on k's parts,
// with every room of rules made unless it exists.
func (g gateFlags) config(ctx context.Context, c coreFlags, k *core, rules gateway.Rules, component string) (gateway.Config, error) {
	for _, r := range rules.Rooms() {
		if _, err := k.q.EnsureRoom(ctx, r, queue.DefaultSettings()); err != nil {
			return gateway.Config{}, fmt.Errorf("room %s: %w", r, err)
		}
	}
	return gateway.Config{
		Queue: k.q, Keys: k.keys, Rules: rules, Registry: k.reg,
		API:             k.api(c, httpapi.Config{Bypass: rules.BypassList}),
		Logger:          k.log.With("component", component),
		InsecureCookies: *c.insecure, FailOpen: *c.failOpen, Flood: k.flood, Identity: k.identity,
		BodyTimeout: *g.bodyTimeout, PublicHosts: *g.publicHosts, Trusted: c.parsed.trusted,
		Lang: *g.lang, WaitingTemplate: *g.waitingTemplate, PageDir: *g.pageDir,
	}, nil
}

// limit puts ln under the connection caps and srv under the header
// bounds (--max-header-bytes, --header-timeout).
func (g gateFlags) limit(ln net.Listener, c coreFlags, srv *http.Server) net.Listener {
	return g.conns.bound(ln, srv, c.parsed.trusted)
}

// edgeServer is the edge's HTTP server: no ReadTimeout or WriteTimeout, since
// server-sent events and websockets stream for as long as they last; the
// gateway bounds reading a request body itself (--body-timeout), limit the
// headers.
func edgeServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, IdleTimeout: 2 * time.Minute}
}
