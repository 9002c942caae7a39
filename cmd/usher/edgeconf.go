package main

import (
	"fmt"
	"io"

	"usher/internal/edgeconf"
)

// printFlags are usher auth's --print flags: which front proxy's
// configuration to write, and for which origin and addresses.
type printFlags struct {
	print, origin, listen, usher, dir *string
}

func addPrintFlags(f *flags) printFlags {
	return printFlags{
		print:  f.string("print", "", "write a complete front-proxy configuration instead of serving: nginx or caddy (docs/edge.md)"),
		origin: f.string("origin", "", "with --print: the site's origin, such as http://127.0.0.1:9000"),
		listen: f.string("listen", "127.0.0.1:8000", "with --print: the address the front proxy serves visitors on"),
		usher:  f.string("usher", "http://127.0.0.1:8080", "with --print: usher auth's --addr as the front proxy reaches it"),
		dir:    f.string("edge-dir", "", "with --print: an absolute directory the front proxy owns (nginx's pid file, logs, temporary files; Caddy's storage)"),
	}
}

// write prints the configuration for the gate's public hosts, its cookies
// and its release listener.
func (p printFlags) write(c coreFlags, g gateFlags, release string, w io.Writer) error {
	ec := edgeconf.Config{
		Listen: *p.listen, Origin: *p.origin, Usher: *p.usher, Release: release, Dir: *p.dir,
		Hosts: *g.publicHosts, InsecureCookies: *c.insecure,
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
