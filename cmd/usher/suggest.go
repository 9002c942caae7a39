package main

import (
	"errors"
	"flag"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Parse errors of the flag package, to be said again in usher's words.
var (
	unknownFlag = regexp.MustCompile(`^flag provided but not defined: -+(.+)$`)
	badValue    = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-+([^:]+): `)
)

// flagAliases are flags other servers use, and the flag usher has for the
// same thing.
var flagAliases = map[string]string{"port": "addr", "listen": "addr", "bind": "addr", "host": "addr", "address": "addr"}

// explain rewrites a parse error of f's command line: an unknown flag names
// the flag it probably meant, a bad value says what the flag wants.
func (f *flags) explain(err error) error {
	msg := err.Error()
	if m := unknownFlag.FindStringSubmatch(msg); m != nil {
		name, _, _ := strings.Cut(m[1], "=")
		if alias, ok := flagAliases[name]; ok && f.Lookup(alias) != nil {
			return fmt.Errorf("unknown flag --%s: usher %s takes --%s host:port (such as --%s :8080)", name, f.Name(), alias, alias)
		}
		var names []string
		f.VisitAll(func(fl *flag.Flag) { names = append(names, fl.Name) })
		if near := nearest(name, names); near != "" {
			return fmt.Errorf("unknown flag --%s: did you mean --%s? ('usher %s -h' lists the flags)", name, near, f.Name())
		}
		return fmt.Errorf("unknown flag --%s ('usher %s -h' lists the flags)", name, f.Name())
	}
	if m := badValue.FindStringSubmatch(msg); m != nil {
		if fl := f.Lookup(m[2]); fl != nil {
			want := ""
			switch fl.Value.(flag.Getter).Get().(type) {
			case time.Duration:
				want = fmt.Sprintf("want a duration with its unit, such as 500ms or 5m (default %s)", fl.DefValue)
			case bool:
				want = "want true or false"
			case int, int64, uint, uint64:
				want = "want a whole number"
			case float64:
				want = "want a number"
			}
			if want != "" {
				return fmt.Errorf("bad setting: %s: %s", f.setting(fl.Name, m[1]), want)
			}
		}
	}
	return err
}

// nearest is the name closest to s by edit distance, at most 2 edits away
// (and fewer than s has letters), or "" when none is.
func nearest(s string, names []string) string {
	best, bestD := "", min(3, len(s))
	for _, n := range names {
		if d := editDistance(s, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// errUnknownCommand is the error of run for an unknown command, naming the
// command it probably meant.
func errUnknownCommand(cmd string) error {
	if near := nearest(cmd, commands); near != "" {
		return fmt.Errorf("unknown command %q: did you mean %q?", cmd, near)
	}
	return errors.New("unknown command " + fmt.Sprintf("%q", cmd))
}

// commands are run's commands, for errUnknownCommand.
var commands = []string{"serve", "proxy", "auth", "collect", "seed", "keys", "invites", "verify-draw", "plan", "origin", "loadtest", "version", "help"}
