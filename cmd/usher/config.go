package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// flags wraps a FlagSet whose defaults come from USHER_* environment
// variables: a flag beats the variable, the variable beats the default.
type flags struct {
	*flag.FlagSet
	getenv func(string) string
	errs   []string
}

func newFlags(name string, getenv func(string) string, stderr io.Writer) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &flags{FlagSet: fs, getenv: getenv}
}

func envName(flagName string) string {
	return "USHER_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func (f *flags) string(name, def, usage string) *string {
	if v := f.getenv(envName(name)); v != "" {
		def = v
	}
	return f.String(name, def, usage+" ($"+envName(name)+")")
}

func (f *flags) bool(name string, def bool, usage string) *bool {
	if v := f.getenv(envName(name)); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			f.errs = append(f.errs, fmt.Sprintf("%s=%q: want true or false", envName(name), v))
		}
		def = b
	}
	return f.Bool(name, def, usage+" ($"+envName(name)+")")
}

func (f *flags) int(name string, def int, usage string) *int {
	if v := f.getenv(envName(name)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			f.errs = append(f.errs, fmt.Sprintf("%s=%q: want a whole number", envName(name), v))
		}
		def = n
	}
	return f.Int(name, def, usage+" ($"+envName(name)+")")
}

func (f *flags) duration(name string, def time.Duration, usage string) *time.Duration {
	if v := f.getenv(envName(name)); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			f.errs = append(f.errs, fmt.Sprintf("%s=%q: want a duration such as 500ms or 5m", envName(name), v))
		}
		def = d
	}
	return f.Duration(name, def, usage+" ($"+envName(name)+")")
}

// positive reports a setting that must be above zero.
func (f *flags) positive(name string, v float64) {
	if v <= 0 {
		f.errs = append(f.errs, fmt.Sprintf("--%s/%s: want more than 0", name, envName(name)))
	}
}

// parse parses args and reports bad environment values first.
func (f *flags) parse(args []string) error {
	if err := f.Parse(args); err != nil {
		return err
	}
	return f.check()
}

// check reports bad settings collected so far.
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
