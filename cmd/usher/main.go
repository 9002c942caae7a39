// Command usher is a virtual waiting room: it puts visitors in a fair queue
// and admits them only as fast as the site behind it can serve.
//
// main is wiring only: run parses the subcommand and its flags, builds the
// parts and supervises them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "usher:", err)
		os.Exit(1)
	}
}

const usage = `usage: usher <command> [flags]

commands:
  serve     run the waiting room and booking API on embedded defaults, or on Redis, PostgreSQL, NATS
  proxy     gate any website: a reverse proxy that queues visitors in front of an origin
  auth      gate a website behind the proxy it already runs (nginx auth_request, Caddy forward_auth)
  collect   count an external NATS's event stream into analytics tables (SQLite or PostgreSQL)
  seed      create a demo concert with one schedule of N seats (default 50,000)
  page      check a waiting page directory and audit its accessibility (usher page check DIR)
  keys      list or rotate the signing keys (usher keys list|rotate)
  invites   print invite codes for a presale room (room setting require_invite)
  verify-draw  check a room's opening draw: the seed against its commitment, an admission order against the draw
  plan      size a room from the origin's capacity (Little's law, seed 002)
  origin    run a simulated origin (worker pool, connection pool, service time)
  loadtest  run a load test: direct to the origin, or queued through usher
  version   print the version, the VCS revision and the Go version (also usher --version)

Run 'usher <command> -h' for a command's flags. Every flag also reads an environment
variable, named in its help: USHER_* for the settings commands share (the listen address,
stores, databases and logs of serve and proxy), USHER_<COMMAND>_* for a command's own.
`

// run is the whole program; tests call it directly.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("no command given")
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "serve":
		return helpIsNotAnError(serve(ctx, rest, getenv, stdout, stderr))
	case "proxy":
		return helpIsNotAnError(proxy(ctx, rest, getenv, stdout, stderr))
	case "auth":
		return helpIsNotAnError(auth(ctx, rest, getenv, stdout, stderr))
	case "seed":
		return helpIsNotAnError(seed(ctx, rest, getenv, stdout, stderr))
	case "collect":
		return helpIsNotAnError(collect(ctx, rest, getenv, stdout, stderr))
	case "page":
		return helpIsNotAnError(pageCheck(ctx, rest, getenv, stdout, stderr))
	case "keys":
		return helpIsNotAnError(keys(rest, getenv, stdout, stderr))
	case "invites":
		return helpIsNotAnError(invites(rest, getenv, stdout, stderr))
	case "verify-draw":
		return helpIsNotAnError(verifyDraw(ctx, rest, getenv, stdout, stderr))
	case "plan":
		return helpIsNotAnError(plan(ctx, rest, getenv, stdout, stderr))
	case "origin":
		return helpIsNotAnError(origin(ctx, rest, getenv, stdout, stderr))
	case "loadtest":
		return helpIsNotAnError(loadtest(ctx, rest, getenv, stdout, stderr))
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, version())
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return errUnknownCommand(cmd)
	}
}

// helpIsNotAnError turns the -h flag's "error" into success.
func helpIsNotAnError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

// version describes this binary from its build info.
func version() string { return describeBuild(debug.ReadBuildInfo()) }

// describeBuild writes the module version (dev when the go command
// recorded none), the VCS revision and time when it recorded them (with
// "modified" for uncommitted changes), and the Go version, such as
// "usher v0.0.0-20261201043023-47809e2a06c5 revision 47809e2a06c5
// 2026-12-01T04:30:23Z go1.26.8". go build stamps the revision in a git
// checkout, unless -buildvcs=false; go run and go test do not.
func describeBuild(bi *debug.BuildInfo, ok bool) string {
	v := []string{"usher", "dev"}
	if !ok {
		return strings.Join(append(v, runtime.Version()), " ")
	}
	if m := bi.Main.Version; m != "" && m != "(devel)" {
		v[1] = m
	}
	var rev, at, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value[:min(12, len(s.Value))]
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "modified"
			}
		}
	}
	if rev != "" {
		v = append(v, "revision", rev)
	}
	for _, s := range []string{at, modified} {
		if s != "" {
			v = append(v, s)
		}
	}
	return strings.Join(append(v, bi.GoVersion), " ")
}
