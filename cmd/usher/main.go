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
	"runtime/debug"
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
  seed      create a demo concert with one schedule of N seats (default 50,000)
  keys      list or rotate the signing keys (usher keys list|rotate)
  plan      size a room from the origin's capacity (Little's law, seed 002)
  origin    run a simulated origin (worker pool, connection pool, service time)
  loadtest  run a load test: direct to the origin, or queued through usher
  version   print the version

Run 'usher <command> -h' for a command's flags.
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
	case "seed":
		return helpIsNotAnError(seed(ctx, rest, getenv, stdout, stderr))
	case "keys":
		return helpIsNotAnError(keys(rest, getenv, stdout, stderr))
	case "plan":
		return helpIsNotAnError(plan(ctx, rest, getenv, stdout, stderr))
	case "origin":
		return helpIsNotAnError(origin(ctx, rest, getenv, stdout, stderr))
	case "loadtest":
		return helpIsNotAnError(loadtest(ctx, rest, getenv, stdout, stderr))
	case "version":
		fmt.Fprintln(stdout, "usher", version())
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}

// helpIsNotAnError turns the -h flag's "error" into success.
func helpIsNotAnError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
