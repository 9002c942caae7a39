package main

import (
	"debug/elf"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"
)

// shellWords splits a Dockerfile RUN line as sh would for the forms it
// uses: words separated by spaces, double quotes kept together.
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	quoted, inWord := false, false
	for _, r := range line {
		switch {
		case r == '"':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
			}
			inWord = false
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// TestDockerBuild builds usher the way the Dockerfile does (its go build
// line, run here) and checks that the binary is static, so that it runs on
// any base image, and that it runs. It checks the Dockerfile's other
// promises as text: a non-root user, serve by default, a health check on
// /healthz at the address the image sets. Docker itself is not run.
func TestDockerBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds usher from scratch (-trimpath): slow")
	}
	t.Parallel()
	df := readDoc(t, "Dockerfile")
	var build []string
	for line := range strings.Lines(df) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "RUN "); ok && strings.Contains(rest, "go build") {
			build = shellWords(rest)
		}
	}
	i := slices.Index(build, "go")
	if i < 0 || i+1 >= len(build) || build[i+1] != "build" {
		t.Fatalf("Dockerfile: no RUN … go build line (found %q)", build)
	}
	env, args := build[:i], build[i+2:]
	if !slices.Contains(env, "CGO_ENABLED=0") {
		t.Errorf("Dockerfile builds with %v, want CGO_ENABLED=0 (a static binary)", env)
	}
	out := filepath.Join(t.TempDir(), "usher")
	o := slices.Index(args, "-o")
	if o < 0 || o+1 >= len(args) {
		t.Fatalf("Dockerfile's go build has no -o: %q", args)
	}
	args[o+1] = out
	cmd := exec.Command("go", append([]string{"build"}, args...)...)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %q with %v: %v\n%s", args, env, err, b)
	}

	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary has a %v program header: it is not static", p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs %v: it is not static", libs)
	}
	v, err := exec.Command(out, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(v), "usher ") {
		t.Errorf("usher version: %q, %v", v, err)
	}

	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^FROM \S+ AS build$`),                                   // multi-stage
		regexp.MustCompile(`(?m)^COPY --from=build /out/usher /usr/local/bin/usher$`),   // the binary built above
		regexp.MustCompile(`(?m)^USER [1-9][0-9]*:[1-9][0-9]*$`),                        // not root
		regexp.MustCompile(`(?m)^ENV USHER_ADDR=:8080`),                                 // the address …
		regexp.MustCompile(`(?m)^EXPOSE 8080$`),                                         // … exposed …
		regexp.MustCompile(`CMD wget -q -O /dev/null http://127\.0\.0\.1:8080/healthz`), // … and checked
		regexp.MustCompile(`(?m)^ENTRYPOINT \["usher"\]$`),
		regexp.MustCompile(`(?m)^CMD \["serve"\]$`),
	} {
		if !want.MatchString(df) {
			t.Errorf("Dockerfile lacks %s", want)
		}
	}
	if !strings.Contains(readDoc(t, ".dockerignore"), ".git") {
		t.Error(".dockerignore does not leave out .git (the build has -buildvcs=false, but the context would carry the history)")
	}
}

type composeService struct {
	Image       string
	Build       map[string]string
	Command     []string
	Environment map[string]string
	Volumes     []string
	Ports       []string
	DependsOn   map[string]struct{ Condition string } `yaml:"depends_on"`
	Healthcheck struct {
		Test    []string
		Disable bool
	}
}

// TestCompose parses deploy/compose.yaml and checks it against usher: every
// flag and USHER_ variable of an usher container is one its subcommand has;
// the serve instances (at least two) share one Redis, PostgreSQL, NATS with
// JetStream, keys directory and admin key, on services of the file; every
// dependency and health check points at something real. Docker is not run.
func TestCompose(t *testing.T) {
	t.Parallel()
	var c struct {
		Services map[string]composeService
		Volumes  map[string]any
	}
	if err := yaml.Unmarshal([]byte(readDoc(t, "deploy/compose.yaml")), &c); err != nil {
		t.Fatalf("deploy/compose.yaml: %v", err)
	}
	known := map[string]map[string]bool{} // subcommand → its flags and variables
	for _, cmd := range []string{"serve", "proxy", "origin"} {
		known[cmd] = map[string]bool{}
		for _, s := range helpSettings(t, cmd) {
			known[cmd]["--"+s.flag] = true
			if s.env != "" {
				known[cmd][s.env] = true
			}
		}
	}
	var serves []string
	for name, s := range c.Services {
		for dep := range s.DependsOn {
			if _, ok := c.Services[dep]; !ok {
				t.Errorf("%s depends on %s, which is not a service", name, dep)
			}
		}
		for _, v := range s.Volumes {
			if vol, _, ok := strings.Cut(v, ":"); ok && !strings.HasPrefix(vol, ".") && !strings.HasPrefix(vol, "/") {
				if _, ok := c.Volumes[vol]; !ok {
					t.Errorf("%s mounts the volume %s, which volumes does not declare", name, vol)
				}
			}
		}
		if s.Build == nil {
			continue // redis, postgres, nats
		}
		if s.Build["dockerfile"] != "Dockerfile" || s.Build["context"] != ".." {
			t.Errorf("%s builds %v, want the repository's Dockerfile", name, s.Build)
		}
		if len(s.Command) == 0 || known[s.Command[0]] == nil {
			t.Errorf("%s runs %q, want serve, proxy or origin", name, s.Command)
			continue
		}
		sub := s.Command[0]
		for _, a := range s.Command[1:] {
			if strings.HasPrefix(a, "-") && !known[sub][a] {
				t.Errorf("%s: usher %s has no flag %s", name, sub, a)
			}
		}
		for k := range s.Environment {
			if !known[sub][k] {
				t.Errorf("%s: usher %s reads no variable %s", name, sub, k)
			}
		}
		for _, p := range s.Ports {
			admin := strings.HasPrefix(p, "127.0.0.1:") && strings.HasSuffix(p, ":8090")
			if !strings.HasSuffix(p, ":8080") && !admin {
				t.Errorf("%s publishes %s, want the image's port 8080, or the admin listener's 8090 on the host's loopback", name, p)
			}
		}
		switch {
		case sub == "serve":
			serves = append(serves, name)
		case sub == "proxy" && !slices.Contains(s.Healthcheck.Test, "http://127.0.0.1:8080/_usher/healthz"):
			t.Errorf("proxy's health check %q: want /_usher/healthz (the proxy hands /healthz to the origin)", s.Healthcheck.Test)
		}
	}
	if len(serves) < 2 {
		t.Fatalf("the compose file runs %d usher serve instances, want two or more", len(serves))
	}

	first := c.Services[serves[0]].Environment
	for _, k := range []string{"USHER_STORE", "USHER_DB", "USHER_NATS", "USHER_NATS_NAME", "USHER_KEYS_DIR", "USHER_ADMIN_KEY", "USHER_REDIS_PREFIX"} {
		for _, name := range serves[1:] {
			if got := c.Services[name].Environment[k]; got != first[k] {
				t.Errorf("%s has %s=%q, %s %q: instances must share it", name, k, got, serves[0], first[k])
			}
		}
	}
	for k, scheme := range map[string]string{"USHER_STORE": "redis", "USHER_DB": "postgres", "USHER_NATS": "nats"} {
		u, err := url.Parse(first[k])
		if err != nil || u.Scheme != scheme {
			t.Errorf("%s=%q, want a %s:// URL", k, first[k], scheme)
			continue
		}
		if _, ok := c.Services[u.Hostname()]; !ok {
			t.Errorf("%s=%q names %s, which is not a service", k, first[k], u.Hostname())
		}
	}
	if !strings.HasPrefix(first["USHER_ADMIN_KEY"], "${USHER_ADMIN_KEY:?") {
		t.Errorf("USHER_ADMIN_KEY=%q, want it required from the environment (${USHER_ADMIN_KEY:?…}), not written in the file", first["USHER_ADMIN_KEY"])
	}
	for _, name := range serves {
		if !slices.Contains(c.Services[name].Volumes, "keys:"+first["USHER_KEYS_DIR"]) {
			t.Errorf("%s does not mount the shared keys volume at %s", name, first["USHER_KEYS_DIR"])
		}
	}
	// The later instances wait for the first, which creates the signing key.
	for _, name := range serves[1:] {
		if c.Services[name].DependsOn[serves[0]].Condition != "service_healthy" {
			// serves is in map order: accept either instance as the first.
			if c.Services[serves[0]].DependsOn[name].Condition != "service_healthy" {
				t.Errorf("neither %s nor %s waits for the other to be healthy (the first creates the signing key)", name, serves[0])
			}
		}
	}
	nats := c.Services["nats"]
	if !slices.Contains(nats.Command, "--jetstream") && !slices.Contains(nats.Command, "-js") {
		t.Errorf("nats runs %q, want JetStream (--jetstream)", nats.Command)
	}
}
