package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// flags wraps a FlagSet whose defaults come from environment variables: a
// flag beats the variable, the variable beats the default. A flag's
// variable is its name upper-cased under the prefix in force when it is
// defined: USHER_ for the settings several subcommands share with one
// meaning (serve's and proxy's core, the databases, the logs), then a
// subcommand's own prefix (USHER_PROXY_, USHER_ORIGIN_, …) set with own,
// so that one variable never means two things.
type flags struct {
	*flag.FlagSet
	getenv func(string) string
	prefix string
	env    map[string]string // flag name → its variable
	errs   []string
}

// sharedPrefix is the prefix of the settings subcommands share.
const sharedPrefix = "USHER_"

func newFlags(name string, getenv func(string) string, stderr io.Writer) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &flags{FlagSet: fs, getenv: getenv, prefix: sharedPrefix, env: map[string]string{}}
}

// own makes the flags defined from now on read USHER_<SUBCOMMAND>_*.
func (f *flags) own(subcommand string) {
	f.prefix = sharedPrefix + strings.ToUpper(strings.ReplaceAll(subcommand, "-", "_")) + "_"
}

// envName is the variable of a flag defined (or about to be) on f.
func (f *flags) envName(flagName string) string {
	if v, ok := f.env[flagName]; ok {
		return v
	}
	v := f.prefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
	f.env[flagName] = v
	return v
}

// lookup returns the value of a flag's variable, "" when unset.
func (f *flags) lookup(flagName string) string { return f.getenv(f.envName(flagName)) }

// use is a flag's usage with its variable.
func (f *flags) use(flagName, usage string) string { return usage + " ($" + f.envName(flagName) + ")" }

func (f *flags) string(name, def, usage string) *string {
	if v := f.lookup(name); v != "" {
		def = v
	}
	return f.String(name, def, f.use(name, usage))
}

func (f *flags) bool(name string, def bool, usage string) *bool {
	if v := f.lookup(name); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			f.errs = append(f.errs, f.setting(name, v)+": want true or false")
		}
		def = b
	}
	return f.Bool(name, def, f.use(name, usage))
}

func (f *flags) int(name string, def int, usage string) *int {
	if v := f.lookup(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			f.errs = append(f.errs, f.setting(name, v)+": want a whole number")
		}
		def = n
	}
	return f.Int(name, def, f.use(name, usage))
}

func (f *flags) duration(name string, def time.Duration, usage string) *time.Duration {
	if v := f.lookup(name); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			f.errs = append(f.errs, f.setting(name, v)+": want a duration such as 500ms or 5m")
		}
		def = d
	}
	return f.Duration(name, def, f.use(name, usage))
}

// isSet reports whether a flag was given, on the command line or in its
// variable.
func (f *flags) isSet(name string) bool {
	set := f.lookup(name) != ""
	f.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}

// positive reports a setting that must be above zero.
func (f *flags) positive(name string, v float64) {
	if v <= 0 {
		f.errs = append(f.errs, fmt.Sprintf("--%s/%s: want more than 0", name, f.envName(name)))
	}
}

// parse parses args and reports bad environment values first. A command
// line it cannot parse is explained (explain) without the whole usage;
// -h prints the usage.
func (f *flags) parse(args []string) error {
	out := f.Output()
	var buf bytes.Buffer
	f.SetOutput(&buf)
	err := f.Parse(args)
	f.SetOutput(out)
	switch {
	case errors.Is(err, flag.ErrHelp):
		out.Write(buf.Bytes())
		return err
	case err != nil:
		return f.explain(err)
	}
	return f.check()
}

// setting names a setting in an error by its flag, its variable and its
// value (a password hidden): --store/USHER_STORE="redis://…".
func (f *flags) setting(name, value string) string {
	return fmt.Sprintf("--%s/%s=%q", name, f.envName(name), redactURL(value))
}

// sharedSetting is setting for a flag under the shared prefix, for the
// code that opens what the shared settings name.
func sharedSetting(name, value string) string {
	return fmt.Sprintf("--%s/%s%s=%q", name, sharedPrefix, strings.ToUpper(strings.ReplaceAll(name, "-", "_")), redactURL(value))
}

// check reports bad settings collected so far, each of which starts with
// its flag: "bad setting: --store/USHER_STORE=…: want …".
func (f *flags) check() error {
	if len(f.errs) > 0 {
		return fmt.Errorf("bad setting: %s", strings.Join(f.errs, "; "))
	}
	if f.Parsed() && f.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", f.Arg(0))
	}
	return nil
}

// keysDir is where signing keys live: --keys-dir, or <data-dir>/keys.
func keysDir(keysDir, dataDir string) string {
	if keysDir != "" {
		return keysDir
	}
	return filepath.Join(dataDir, "keys")
}
