package main

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"usher/internal/clientip"
	"usher/internal/conncap"
	"usher/internal/edgeconf"
)

// defaultMaxConnsPerClient is --max-conns-per-client's default. One public
// IPv4 address of a carrier-grade NAT carries tens to thousands of
// subscribers, each browser with up to 6 connections, so the bound is not
// "a few per user": it is how many of one address's connections may be in
// the middle of a request (or a stream) at once. Idle ones are shed to make
// room, so a crowd behind one address keeps working at 512; a single
// client needs 20 addresses to fill the default 10,000 with busy
// connections.
const defaultMaxConnsPerClient = 512

// defaultMaxHeaderBytes is --max-header-bytes' default: as much as nginx's
// default buffers hold (4 of 8 KiB), room for a site's many cookies. Go's
// server reads up to 4 KiB past it before it answers 431, and keeps every
// header line it has read until the request ends: a connection stalled
// just under the bound costs about ten times the bytes in the worst case
// (tiny header lines; docs/benchmarks.md).
const defaultMaxHeaderBytes = edgeconf.DefaultMaxHeaderBytes

// connFlags are the bounds on what a client's connections hold: the
// connection caps and the size and time of a request's headers, shared by
// serve, proxy and auth.
type connFlags struct {
	total, perClient, headerBytes *int
	headerTimeout                 *time.Duration
}

// addConnFlags defines them on f; headerTimeout is --header-timeout's
// default.
func addConnFlags(f *flags, headerTimeout time.Duration) connFlags {
	return connFlags{
		total: f.int("max-conns", 10_000,
			"most client connections open at once; from 90% on a newcomer closes the longest-idle one; at the cap with none idle, the longest-stalled one (no request after 2 s), else it waits to be accepted"),
		perClient: f.int("max-conns-per-client", defaultMaxConnsPerClient,
			"most connections open at once from one client (IPv4 address, IPv6 /64; --trusted-proxies exempt), including those still sending their first request: a newcomer closes that client's longest-idle one, else its longest-stalled one (no request after 2 s), or is refused with 503 when none is either"),
		headerBytes: f.int("max-header-bytes", defaultMaxHeaderBytes,
			"most bytes of a request's line and headers (Go reads up to 4096 more); a larger request gets 431 and its connection closes"),
		headerTimeout: f.duration("header-timeout", headerTimeout,
			"most time to read a request's line and headers; a client slower than that loses the connection"),
	}
}

// minHeaderBytes is the smallest --max-header-bytes: a browser's request
// with a few cookies.
const minHeaderBytes = 4096

func (cf connFlags) check(f *flags) {
	f.positive("max-conns", float64(*cf.total))
	f.positive("max-conns-per-client", float64(*cf.perClient))
	if *cf.headerBytes < minHeaderBytes {
		f.errs = append(f.errs, fmt.Sprintf("--max-header-bytes/%s: want at least %d", f.envName("max-header-bytes"), minHeaderBytes))
	}
	f.positive("header-timeout", cf.headerTimeout.Seconds())
}

// bound puts ln under the connection caps (package conncap; trusted: the
// proxies exempt from the per-client one) and srv under the header bounds;
// srv's ConnState becomes the limiter's.
func (cf connFlags) bound(ln net.Listener, srv *http.Server, trusted clientip.Trusted) net.Listener {
	lim := conncap.New(ln, *cf.total, *cf.perClient, trusted)
	srv.ConnState = lim.ConnState
	srv.MaxHeaderBytes = *cf.headerBytes
	srv.ReadHeaderTimeout = *cf.headerTimeout
	return lim
}
