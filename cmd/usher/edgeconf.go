package main

import (
	"fmt"
	"io"

	"usher/internal/edgeconf"
	"usher/internal/gateway"
)

// printFlags are usher auth's --print flags: which front proxy's
// configuration to write, and for which origin and addresses.
type printFlags struct {
	print, origin, listen, dir, fail *string
	ushers                           *[]string
}

func addPrintFlags(f *flags) printFlags {
	return printFlags{
		print:  f.string("print", "", "write a complete front-proxy configuration instead of serving: nginx or caddy (docs/edge.md)"),
		origin: f.string("origin", "", "with --print: the site's origin, such as http://127.0.0.1:9000"),
		listen: f.string("listen", "127.0.0.1:8000", "with --print: the address the front proxy serves visitors on"),
		ushers: f.stringList("usher", "with --print: usher auth's --addr as the front proxy reaches it, repeatable: one per instance on the same store (default http://127.0.0.1:8080)"),
		dir:    f.string("edge-dir", "", "with --print: an absolute directory the front proxy owns (nginx's pid file, logs, temporary files; Caddy's storage; the kill switch file usher-off)"),
		fail:   f.string("edge-fail", "closed", "with --print: what a gated request gets when no usher answers: closed (the edge's own 503 page) or open (the origin, unchecked)"),
	}
}

// write prints the configuration for the gate's path rules, public
// hosts, cookies and release listener.
func (p printFlags) write(c coreFlags, g gateFlags, release string, w io.Writer) error {
	rules := gateway.Rules{DefaultRoom: *g.room, Gate: *g.gates, Open: *g.opens}
	if err := rules.Validate(); err != nil {
		return fmt.Errorf("bad path rules: %w", err)
	}
	if *p.fail != "closed" && *p.fail != "open" {
		return fmt.Errorf("bad setting: --edge-fail=%q: want closed or open", *p.fail)
	}
	ushers := *p.ushers
	if len(ushers) == 0 {
		ushers = []string{"http://127.0.0.1:8080"}
	}
	ec := edgeconf.Config{
		Listen: *p.listen, Origin: *p.origin, Ushers: ushers, Release: release, Dir: *p.dir,
		Hosts: *g.publicHosts, InsecureCookies: *c.insecure,
		Open: *g.opens, Gate: *g.gates, FailOpen: *p.fail == "open",
		MaxHeaderBytes: *g.conns.headerBytes, HeaderTimeout: *g.conns.headerTimeout,
	}
	render := map[string]func(edgeconf.Config) (string, error){"nginx": edgeconf.Nginx, "caddy": edgeconf.Caddy}[*p.print]
	if render == nil {
		return fmt.Errorf("bad setting: --print=%q: want nginx or caddy", *p.print)
	}
	conf, err := render(ec)
	if err != nil {
		return fmt.Errorf("--print %s: %w", *p.print, err)
	}
	_, err = io.WriteString(w, conf)
	return err
}
