package main

import (
	"fmt"
	"io"
	"path/filepath"
	"time"

	"usher/internal/token"
)

const keysUsage = `usage: usher keys list|rotate [flags]

  list    print the signing keys: id, creation time, time from which each signs
  rotate  stage a new key that signs from now + --activate-in

Run 'usher keys list -h' or 'usher keys rotate -h' for their flags.
`

// keys lists the signing keys or stages a new one.
func keys(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(stdout, keysUsage)
		return nil
	}
	if len(args) == 0 || (args[0] != "list" && args[0] != "rotate") {
		fmt.Fprint(stderr, keysUsage)
		return fmt.Errorf("usher keys: want list or rotate")
	}
	f := newFlags("keys "+args[0], getenv, stderr)
	dataDir := f.string("data-dir", "./data", "data directory")
	keysFlag := f.string("keys-dir", "", "signing keys directory (default <data-dir>/keys)")
	activateIn := new(time.Duration)
	if args[0] == "rotate" {
		f.DurationVar(activateIn, "activate-in", 0, "how long the new key only verifies before it signs (time to copy it to every instance)")
	}
	if err := f.parse(args[1:]); err != nil {
		return err
	}
	dir := keysDir(*keysFlag, *dataDir)
	if args[0] == "rotate" {
		if *activateIn < 0 {
			return fmt.Errorf("bad setting: --activate-in=%v: want 0 or more", *activateIn)
		}
		at := time.Now().Add(*activateIn)
		kid, err := token.Rotate(dir, at)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "new key %s in %s signs from %s; restart every instance after copying it\n", kid, dir, at.Format(time.RFC3339))
		return nil
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "*.json")); len(names) == 0 {
		return fmt.Errorf("no keys in %s (usher serve creates the first one)", dir)
	}
	ring, err := token.LoadDir(dir, time.Now)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%-14s %-25s %s\n", "KID", "CREATED", "SIGNS FROM")
	for _, k := range ring.Keys() {
		fmt.Fprintf(stdout, "%-14s %-25s %s\n", k.ID, k.Created.Format(time.RFC3339), k.ActivateAt.Format(time.RFC3339))
	}
	return nil
}
