package main

// The README's walk-throughs, replayed: every "## … walk-through" section's
// sh blocks run against a real server started through run, and each line
// they print is checked against the output block that follows, by shape:
// the same JSON field names at every level, the same states, statuses,
// error codes and other stable values, timestamps with the same precision,
// and the same plain-text lines. Tokens, ids, timestamps, estimates and
// error messages are compared by type only. So the documented requests
// cannot drift from the server's answers.
//
// The sh blocks are read by a small interpreter that knows exactly the shell
// the walk-throughs use: assignments and export, $VAR and $(…), curl, grep
// -o, cut -d -f, cat, echo, mktemp -d, sleep, `go run ./cmd/usher …`, and
// `while :; do … case … esac; done`. A line it does not know fails the test,
// so a new walk-through step gets a rule here or a simpler command.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"usher/internal/testenv"
)

// readmePatience bounds every wait of the replay (a server to start, a
// documented state to be reached); a guard against a hang, not a speed
// requirement.
const readmePatience = time.Minute

func TestReadmeWalkthroughs(t *testing.T) {
	t.Parallel()
	text, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := walkthroughs(string(text))
	if len(sections) < 2 {
		t.Fatalf("found %d walk-through sections in README.md, want the visitor and the booking walk-throughs", len(sections))
	}
	for _, s := range sections {
		t.Run(strings.ReplaceAll(s.title, " ", "_"), func(t *testing.T) {
			t.Parallel()
			sh := &shell{t: t, vars: map[string]string{}, hosts: map[string]string{}}
			if !s.startsServer() {
				sh.quickStart()
			}
			for i, b := range s.blocks {
				if b.lang != "sh" {
					continue
				}
				var want []string
				if i+1 < len(s.blocks) && s.blocks[i+1].lang != "sh" {
					want = nonEmptyLines(s.blocks[i+1].body)
				}
				sh.block(b, want)
			}
		})
	}
}

type mdBlock struct {
	lang string
	body string
	line int
}

type mdSection struct {
	title  string
	blocks []mdBlock
}

// startsServer reports whether the section starts its own server, rather
// than using the Quick start's.
func (s mdSection) startsServer() bool {
	for _, b := range s.blocks {
		if b.lang == "sh" && strings.Contains(b.body, "go run ./cmd/usher serve") {
			return true
		}
	}
	return false
}

// walkthroughs returns the fenced blocks of every "## …walk-through"
// section.
func walkthroughs(md string) []mdSection {
	var out []mdSection
	var cur *mdSection
	var block *mdBlock
	var body strings.Builder
	sc := bufio.NewScanner(strings.NewReader(md))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case block != nil && trimmed == "```":
			block.body = body.String()
			if cur != nil {
				cur.blocks = append(cur.blocks, *block)
			}
			block = nil
		case block != nil:
			body.WriteString(strings.TrimPrefix(line, "   ") + "\n")
		case strings.HasPrefix(trimmed, "```"):
			block = &mdBlock{lang: strings.TrimPrefix(trimmed, "```"), line: n}
			body.Reset()
		case strings.HasPrefix(line, "## "):
			cur = nil
			if strings.HasSuffix(strings.ToLower(line), "walk-through") {
				out = append(out, mdSection{title: strings.TrimPrefix(line, "## ")})
				cur = &out[len(out)-1]
			}
		}
	}
	return out
}

func nonEmptyLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// shell runs one section's sh blocks.
type shell struct {
	t     *testing.T
	vars  map[string]string
	hosts map[string]string // documented host:port → the test server's
	want  []string          // the current block's documented output, left
	cur   mdBlock
	retry bool // a sleep came before: retry the next GET until it matches
	// dataDir stands for the Quick start's ./data, when that server runs.
	dataDir string
}

func (sh *shell) block(b mdBlock, want []string) {
	sh.cur, sh.want = b, want
	lines := joinContinuations(b.body)
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if line == "while :; do" {
			end := i + 1
			for end < len(lines) && strings.TrimSpace(lines[end]) != "done" {
				end++
			}
			sh.loop(lines[i+1 : end])
			i = end
			continue
		}
		sh.emit(sh.run(line))
	}
	if len(sh.want) > 0 {
		sh.t.Errorf("README.md:%d: the commands printed nothing for the documented lines %q", b.line, sh.want)
	}
}

func joinContinuations(body string) []string {
	var out []string
	var cur strings.Builder
	for _, l := range strings.Split(body, "\n") {
		if strings.HasSuffix(l, "\\") {
			cur.WriteString(strings.TrimSuffix(l, "\\") + " ")
			continue
		}
		cur.WriteString(l)
		out = append(out, cur.String())
		cur.Reset()
	}
	return out
}

var caseRE = regexp.MustCompile(`^case \$(\w+) in \*'([^']*)'\*\) sleep [0-9.]+ ;; \*\) break ;; esac$`)

// loop runs a `while :` body until its case breaks; only the last round's
// output is compared, as the README shows one round.
func (sh *shell) loop(body []string) {
	deadline := time.Now().Add(readmePatience)
	for {
		var printed []string
		again := false
		for _, l := range body {
			l = strings.TrimSpace(l)
			if m := caseRE.FindStringSubmatch(l); m != nil {
				again = strings.Contains(sh.vars[m[1]], m[2])
				break
			}
			printed = append(printed, sh.run(l))
		}
		if !again {
			for _, p := range printed {
				sh.emit(p)
			}
			return
		}
		if time.Now().After(deadline) {
			sh.t.Fatalf("README.md:%d: the loop still goes on after %v", sh.cur.line, readmePatience)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// emit compares what a command printed with the next documented lines.
func (sh *shell) emit(out string) {
	sh.t.Helper()
	for _, line := range nonEmptyLines(out) {
		if len(sh.want) == 0 {
			sh.t.Errorf("README.md:%d: the commands print %q, which the README does not show", sh.cur.line, line)
			continue
		}
		if err := sh.compare(sh.want[0], line); err != nil {
			sh.t.Errorf("README.md:%d: documented %s\n got %s\n %v", sh.cur.line, sh.want[0], line, err)
		}
		sh.want = sh.want[1:]
	}
}

func (sh *shell) compare(doc, got string) error {
	for from, to := range sh.hosts {
		doc = strings.ReplaceAll(doc, from, to)
	}
	if strings.HasPrefix(doc, "{") {
		return sameShape(doc, got)
	}
	if got != doc {
		return fmt.Errorf("a different line")
	}
	return nil
}

// run runs one line (commands joined by ;) and returns what it printed.
func (sh *shell) run(line string) string {
	sh.t.Helper()
	var out strings.Builder
	for _, cmd := range split(line, ';') {
		if strings.TrimSpace(cmd) != "" {
			out.WriteString(sh.pipeline(cmd))
		}
	}
	return out.String()
}

// pipeline runs "a | b | c", or a line of assignments.
func (sh *shell) pipeline(cmd string) string {
	sh.t.Helper()
	stages := split(cmd, '|')
	out := ""
	for i, stage := range stages {
		w := sh.words(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(stage), "export ")))
		if len(stages) == 1 && len(w) > 0 && isAssignment(w[0]) {
			for _, a := range w {
				if !isAssignment(a) {
					sh.t.Fatalf("README.md:%d: %q mixes assignments and a command", sh.cur.line, cmd)
				}
				name, value, _ := strings.Cut(a, "=")
				sh.vars[name] = value
			}
			return ""
		}
		out = sh.command(w, out, i > 0)
	}
	return out
}

var assignRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

func isAssignment(w string) bool { return assignRE.MatchString(w) }

// command runs one simple command with stdin in.
func (sh *shell) command(w []string, in string, piped bool) string {
	sh.t.Helper()
	if len(w) == 0 {
		return ""
	}
	switch w[0] {
	case "echo":
		return strings.Join(w[1:], " ") + "\n"
	case "cat":
		b, err := os.ReadFile(w[1])
		if err != nil {
			sh.t.Fatalf("README.md:%d: cat: %v", sh.cur.line, err)
		}
		return string(b)
	case "mktemp":
		return testenv.DataDir(sh.t) + "\n" // a data directory in the README
	case "sleep":
		sh.retry = true
		return ""
	case "grep":
		if len(w) != 3 || w[1] != "-o" {
			break
		}
		var out strings.Builder
		for _, m := range regexp.MustCompile(w[2]).FindAllString(in, -1) {
			out.WriteString(m + "\n")
		}
		return out.String()
	case "cut":
		if len(w) != 3 || !strings.HasPrefix(w[1], "-d") || !strings.HasPrefix(w[2], "-f") {
			break
		}
		var field int
		fmt.Sscan(strings.TrimPrefix(w[2], "-f"), &field)
		var out strings.Builder
		for _, l := range nonEmptyLines(in) {
			if parts := strings.Split(l, strings.TrimPrefix(w[1], "-d")); field >= 1 && field <= len(parts) {
				out.WriteString(parts[field-1])
			}
			out.WriteString("\n")
		}
		return out.String()
	case "curl":
		if !piped {
			return sh.curl(w[1:])
		}
	case "go":
		if len(w) > 3 && w[1] == "run" && w[2] == "./cmd/usher" {
			return sh.usher(w[3:])
		}
	}
	sh.t.Fatalf("README.md:%d: the README test does not know the command %q", sh.cur.line, w)
	return ""
}

// usher runs a subcommand through run: serve in the background until the
// test ends, any other to completion.
func (sh *shell) usher(args []string) string {
	sh.t.Helper()
	if args[0] == "serve" {
		return sh.startServe(args[1:])
	}
	var stdout, stderr strings.Builder
	if err := run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr); err != nil {
		sh.t.Fatalf("README.md:%d: usher %v: %v\n%s", sh.cur.line, args, err, stderr.String())
	}
	return stdout.String()
}

// startServe starts serve on free ports instead of the documented ones
// (--addr, --admin-addr), and maps the documented addresses to them.
func (sh *shell) startServe(args []string) string {
	sh.t.Helper()
	documented := map[string]string{"addr": "localhost:8080", "admin-addr": "localhost:8090"}
	args = append([]string(nil), args...)
	for name := range documented {
		i := slices.Index(args, "--"+name)
		if i < 0 {
			args = append(args, "--"+name, "127.0.0.1:0")
		} else if i+1 < len(args) {
			documented[name], args[i+1] = args[i+1], "127.0.0.1:0"
		}
	}
	base, stdout, stderr := startCommandOutput(sh.t, "serve", "/healthz", map[string]string{}, args...)
	u, _ := url.Parse(base)
	sh.hosts[documented["addr"]] = u.Host
	a, _ := url.Parse(adminOf(sh.t, base))
	sh.hosts[documented["admin-addr"]] = a.Host
	// What serve logs comes after its start lines; the README shows some of
	// it: each documented log line must appear (by its msg), in time.
	var logs []string
	k := 1 // after the start lines
	if len(sh.want) > 1 && strings.HasPrefix(sh.want[1], "usher admin on ") {
		k = 2
	}
	for len(sh.want) > k && strings.HasPrefix(sh.want[k], "time=") {
		logs = append(logs, sh.want[k])
		sh.want = append(sh.want[:k:k], sh.want[k+1:]...)
	}
	for _, l := range logs {
		msg := regexp.MustCompile(`msg=("[^"]*"|\S+)`).FindString(l)
		testenv.Eventually(sh.t, readmePatience, "serve to log "+msg, func() bool {
			return strings.Contains(stderr.String(), msg)
		})
	}
	// The start lines: the visitors' listener's and the admin one's.
	lines := strings.SplitAfter(stdout.String(), "\n")
	return strings.Join(lines[:min(2, len(lines))], "")
}

// curl sends the request the flags describe and returns what curl -s
// would print.
func (sh *shell) curl(args []string) string {
	sh.t.Helper()
	method, target, body, format, discard := "", "", "", "", false
	header := http.Header{}
	for i := 0; i < len(args); i++ {
		switch a := args[i]; a {
		case "-s":
		case "-X":
			i++
			method = args[i]
		case "-H":
			i++
			k, v, _ := strings.Cut(args[i], ":")
			header.Add(k, strings.TrimSpace(v))
		case "-d":
			i++
			body = args[i]
		case "-o":
			i++
			discard = args[i] == "/dev/null"
		case "-w":
			i++
			format = args[i]
		default:
			if strings.HasPrefix(a, "-") || target != "" {
				sh.t.Fatalf("README.md:%d: the README test does not know curl %v", sh.cur.line, args)
			}
			target = a
		}
	}
	if method == "" {
		method = http.MethodGet
		if body != "" {
			method = http.MethodPost
		}
	}
	if !strings.Contains(target, "://") {
		target = "http://" + target
	}
	u, err := url.Parse(target)
	if err != nil {
		sh.t.Fatalf("README.md:%d: curl %s: %v", sh.cur.line, target, err)
	}
	if h, ok := sh.hosts[u.Host]; ok {
		u.Host = h
	} else {
		sh.t.Fatalf("README.md:%d: curl %s: not the documented server", sh.cur.line, target)
	}
	send := func() string {
		req, _ := http.NewRequest(method, u.String(), strings.NewReader(body))
		req.Header = header.Clone()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			sh.t.Fatalf("README.md:%d: curl %s: %v", sh.cur.line, u, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		out := string(b)
		if discard {
			out = ""
		}
		if format != "" {
			f := strings.ReplaceAll(format, `\n`, "\n")
			out += strings.ReplaceAll(f, "%{http_code}", fmt.Sprint(res.StatusCode))
		}
		return out
	}
	out := send()
	if sh.retry && method == http.MethodGet && len(sh.want) > 0 {
		// The README waited (sleep) for a state: wait for it here too, and
		// let emit report the last answer if it never comes.
		for deadline := time.Now().Add(readmePatience); sh.compare(sh.want[0], strings.TrimSpace(out)) != nil && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
			out = send()
		}
	}
	sh.retry = false
	return out
}

// quickStart starts the Quick start's server (`go run ./cmd/usher serve`
// on :8080 and ./data), on a free port and a temporary directory that
// stands for ./data.
func (sh *shell) quickStart() {
	sh.t.Helper()
	dir := testenv.DataDir(sh.t)
	sh.startServe([]string{"--data-dir", dir})
	sh.dataDir = dir
}

// words splits a simple command into words, expanding $VAR, ${VAR} and
// $(…) outside single quotes.
func (sh *shell) words(s string) []string {
	sh.t.Helper()
	var out []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				sh.t.Fatalf("README.md:%d: unbalanced ' in %q", sh.cur.line, s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '$' && j+1 < len(s) && s[j+1] == '(' {
					j = closing(s, j+1)
				}
				j++
			}
			if j >= len(s) {
				sh.t.Fatalf("README.md:%d: unbalanced \" in %q", sh.cur.line, s)
			}
			cur.WriteString(sh.expand(s[i+1 : j]))
			i = j
			inWord = true
		case c == '$':
			n := sh.dollar(s[i:], &cur)
			i += n - 1
			inWord = true
		default:
			if !inWord && strings.HasPrefix(s[i:], "data/") && sh.dataDir != "" {
				cur.WriteString(sh.dataDir + "/")
				i += len("data/") - 1
				inWord = true
				continue
			}
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

// expand expands the inside of a double-quoted string.
func (sh *shell) expand(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '$' {
			i += sh.dollar(s[i:], &b) - 1
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

var nameRE = regexp.MustCompile(`^\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)`)

// dollar expands the $… at the start of s into b and returns its length.
func (sh *shell) dollar(s string, b *strings.Builder) int {
	sh.t.Helper()
	if strings.HasPrefix(s, "$(") {
		end := closing(s, 1)
		out := sh.run(s[2:end])
		b.WriteString(strings.TrimRight(out, "\n"))
		return end + 1
	}
	m := nameRE.FindString(s)
	if m == "" {
		b.WriteByte('$')
		return 1
	}
	name := strings.Trim(m[1:], "{}")
	v, ok := sh.vars[name]
	if !ok {
		sh.t.Fatalf("README.md:%d: $%s is not set", sh.cur.line, name)
	}
	b.WriteString(v)
	return len(m)
}

// closing returns the index of the ) matching the ( at open, skipping
// quoted text.
func closing(s string, open int) int {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '\'':
			if j := strings.IndexByte(s[i+1:], '\''); j >= 0 {
				i += j + 1
			}
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				return i
			}
		}
	}
	return len(s) - 1
}

// split splits s at sep outside quotes and $(…).
func split(s string, sep byte) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\'':
			if j := strings.IndexByte(s[i+1:], '\''); j >= 0 {
				i += j + 1
			}
		case '"':
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '$' && i+1 < len(s) && s[i+1] == '(' {
					i = closing(s, i+1)
				}
			}
		case '$':
			if i+1 < len(s) && s[i+1] == '(' {
				i = closing(s, i+1)
			}
		case sep:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// volatile fields differ from run to run: they are compared by type (and
// timestamps by format) only. An error's message is left to the error
// tests; its code is compared.
var volatile = map[string]bool{
	"ticket": true, "pass": true, "hold_id": true, "reservation_id": true, "message": true,
	"poll_after_ms": true, "eta_seconds": true, "eta_range_seconds": true, "admit_rate_measured": true,
}

// elision is the README's "…" for a shortened array.
var elision = regexp.MustCompile(`,\s*…\s*\]`)

// sameShape compares a documented JSON answer with the server's.
func sameShape(doc, got string) error {
	var d, g any
	if err := json.Unmarshal([]byte(elision.ReplaceAllString(doc, "]")), &d); err != nil {
		return fmt.Errorf("the README's JSON does not parse: %v", err)
	}
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		return fmt.Errorf("the answer is not JSON: %v", err)
	}
	var diffs []string
	shapeDiff("", d, g, strings.Contains(doc, "…]"), &diffs)
	if len(diffs) > 0 {
		return fmt.Errorf("%s", strings.Join(diffs, "; "))
	}
	return nil
}

var fraction = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$`)

func shapeDiff(path string, d, g any, elided bool, diffs *[]string) {
	key := path[strings.LastIndex(path, ".")+1:]
	key, _, _ = strings.Cut(key, "[") // an array's elements are compared as the array's field
	switch d := d.(type) {
	case map[string]any:
		gm, ok := g.(map[string]any)
		if !ok {
			*diffs = append(*diffs, fmt.Sprintf("%s: got %T, want an object", path, g))
			return
		}
		for k := range d {
			if _, ok := gm[k]; !ok {
				*diffs = append(*diffs, fmt.Sprintf("%s.%s: missing from the answer", path, k))
			}
		}
		for k := range gm {
			if _, ok := d[k]; !ok {
				*diffs = append(*diffs, fmt.Sprintf("%s.%s: in the answer, not in the README", path, k))
			} else {
				shapeDiff(path+"."+k, d[k], gm[k], elided, diffs)
			}
		}
	case []any:
		ga, ok := g.([]any)
		if !ok {
			*diffs = append(*diffs, fmt.Sprintf("%s: got %T, want an array", path, g))
			return
		}
		if len(ga) != len(d) && !(elided && len(ga) >= len(d)) {
			*diffs = append(*diffs, fmt.Sprintf("%s: %d elements, want %d", path, len(ga), len(d)))
			return
		}
		for i := range d {
			shapeDiff(fmt.Sprintf("%s[%d]", path, i), d[i], ga[i], elided, diffs)
		}
	case string:
		gs, ok := g.(string)
		switch {
		case !ok:
			*diffs = append(*diffs, fmt.Sprintf("%s: got %T, want a string", path, g))
		case strings.HasSuffix(key, "_at") && d != "…":
			dm, gm := fraction.FindStringSubmatch(d), fraction.FindStringSubmatch(gs)
			if dm == nil || gm == nil || (dm[1] == "") != (gm[1] == "") {
				*diffs = append(*diffs, fmt.Sprintf("%s: %q, want a time like the README's %q", path, gs, d))
			}
		case volatile[key] || strings.Contains(d, "…") || strings.HasSuffix(key, "_at"):
		case gs != d:
			*diffs = append(*diffs, fmt.Sprintf("%s: %q, want %q", path, gs, d))
		}
	default:
		if reflect.TypeOf(d) != reflect.TypeOf(g) {
			*diffs = append(*diffs, fmt.Sprintf("%s: got %T, want %T", path, g, d))
		} else if !volatile[key] && !reflect.DeepEqual(d, g) {
			*diffs = append(*diffs, fmt.Sprintf("%s: %v, want %v", path, g, d))
		}
	}
}

// TestSameShape: the comparison itself fails on the drifts it is for.
func TestSameShape(t *testing.T) {
	t.Parallel()
	const doc = `{"state":"waiting","ticket":"t1.…","poll_after_ms":1236,"expires_at":"2026-11-29T19:15:08Z","seats":[{"seat_id":1},…]}`
	for _, tc := range []struct {
		got string
		ok  bool
	}{
		{`{"state":"waiting","ticket":"t1.x","poll_after_ms":7,"expires_at":"2026-12-01T00:00:00Z","seats":[{"seat_id":1},{"seat_id":2}]}`, true},
		{`{"state":"admitted","ticket":"t1.x","poll_after_ms":7,"expires_at":"2026-12-01T00:00:00Z","seats":[{"seat_id":1}]}`, false},
		{`{"state":"waiting","poll_after_ms":7,"expires_at":"2026-12-01T00:00:00Z","seats":[{"seat_id":1}]}`, false},
		{`{"state":"waiting","ticket":"t1.x","poll_after_ms":7,"expires_at":"2026-12-01T00:00:00Z","seats":[{"seat_id":1}],"extra":1}`, false},
		{`{"state":"waiting","ticket":"t1.x","poll_after_ms":"7","expires_at":"2026-12-01T00:00:00Z","seats":[{"seat_id":1}]}`, false},
		{`{"state":"waiting","ticket":"t1.x","poll_after_ms":7,"expires_at":"2026-12-01T00:00:00.5Z","seats":[{"seat_id":1}]}`, false},
		{`{"state":"waiting","ticket":"t1.x","poll_after_ms":7,"expires_at":"2026-12-01T00:00:00Z","seats":[{"id":1}]}`, false},
		{`{"error":{"code":"not_admitted","message":"m"}}`, false},
	} {
		if err := sameShape(doc, tc.got); (err == nil) != tc.ok {
			t.Errorf("sameShape(README, %s) = %v, want ok %v", tc.got, err, tc.ok)
		}
	}
}
