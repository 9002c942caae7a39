package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/booking"
	"usher/internal/httpapi"
	"usher/internal/queue"
	"usher/internal/sale"
)

// readDoc reads a file relative to the repository root.
func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// tableRow returns the line of a markdown table whose first cell is cell.
func tableRow(t *testing.T, doc, name, cell string) string {
	t.Helper()
	for line := range strings.Lines(doc) {
		if strings.HasPrefix(line, "| "+cell+" |") {
			return line
		}
	}
	t.Fatalf("%s has no table row for %s", name, cell)
	return ""
}

// TestAPIDocCoversRoutes: every route in routes.go is in api.md's endpoint
// table (GET and PUT …/stock were missing).
func TestAPIDocCoversRoutes(t *testing.T) {
	api := readDoc(t, "docs/api.md")
	routes := httpapi.Routes(httpapi.Config{Registry: prometheus.NewRegistry(), Sale: new(sale.Service)})
	if len(routes) < 20 {
		t.Fatalf("found %d routes; did routes.go change?", len(routes))
	}
	for _, r := range routes {
		if !strings.Contains(api, "| `"+r.Pattern+"` |") {
			t.Errorf("api.md's endpoint table lacks `%s`", r.Pattern)
		}
	}
}

// TestDocsListEveryState: the reservation reasons in api.md and the room
// states in api.md and proxy.md are complete (sold_out was missing).
func TestDocsListEveryState(t *testing.T) {
	api, proxy := readDoc(t, "docs/api.md"), readDoc(t, "docs/proxy.md")
	reasons := tableRow(t, api, "api.md", "`reason`")
	for _, r := range []string{booking.ReasonSeatTaken, booking.ReasonSeatUnknown, booking.ReasonSoldOut} {
		if !strings.Contains(reasons, "`"+r+"`") {
			t.Errorf("api.md's reason row lacks %s: %s", r, reasons)
		}
	}
	roomState := tableRow(t, api, "api.md", "`room_state`")
	_, proxyStates, _ := strings.Cut(proxy, "`room_state` is")
	proxyStates, _, _ = strings.Cut(proxyStates, "\n- ")
	for _, s := range []queue.RoomState{queue.Open, queue.Paused, queue.Closed, queue.SoldOut} {
		for name, text := range map[string]string{"api.md's room_state row": roomState, "proxy.md's room_state list": proxyStates} {
			if !strings.Contains(text, "`"+string(s)+"`") {
				t.Errorf("%s lacks %s: %s", name, s, text)
			}
		}
	}
}

// TestDocsPassExpiryWholeSeconds: a pass's expiry is whole seconds (its
// JWT exp), so the documented answers show no fraction.
func TestDocsPassExpiryWholeSeconds(t *testing.T) {
	fraction := regexp.MustCompile(`"(pass_expires_at|expires_at)":"[0-9T:-]+\.[0-9]+Z","pass"|"pass_expires_at":"[0-9T:-]+\.[0-9]+Z"`)
	for _, doc := range []string{"README.md", "docs/api.md", "docs/proxy.md"} {
		for _, m := range fraction.FindAllString(readDoc(t, doc), -1) {
			t.Errorf("%s shows a pass expiry with a fraction of a second: %s", doc, m)
		}
	}
}

// TestSeedsAreExplained: every document that cites a seed links
// docs/seeds.md, which has a section for each seed cited.
func TestSeedsAreExplained(t *testing.T) {
	seeds := readDoc(t, "docs/seeds.md")
	cite := regexp.MustCompile(`(?i)\bseeds? (00[0-9])`)
	docs, _ := filepath.Glob("../../docs/*.md")
	docs = append(docs, "../../README.md")
	for _, path := range docs {
		name := strings.TrimPrefix(path, "../../")
		if name == "docs/seeds.md" {
			continue
		}
		text := readDoc(t, name)
		cited := cite.FindAllStringSubmatch(text, -1)
		if len(cited) == 0 {
			continue
		}
		if !strings.Contains(text, "seeds.md") {
			t.Errorf("%s cites seed %s but does not link docs/seeds.md", name, cited[0][1])
		}
		for _, m := range cited {
			if !strings.Contains(seeds, "## Seed "+m[1]) {
				t.Errorf("%s cites seed %s, which docs/seeds.md does not explain", name, m[1])
			}
		}
	}
}

// otherToolsFlags are flags the docs name for other programs.
var otherToolsFlags = map[string]string{"cluster-pipeline": "redis-cli", "jetstream": "nats-server"}

// TestDocsNameRealFlags: every `--flag` the docs and the README name is a
// flag of some usher command (or of a tool listed in otherToolsFlags).
func TestDocsNameRealFlags(t *testing.T) {
	known := map[string]bool{}
	for _, cmd := range [][]string{{"serve"}, {"proxy"}, {"auth"}, {"seed"}, {"keys", "list"}, {"keys", "rotate"}, {"plan"}, {"origin"}, {"loadtest"}, {"invites"}, {"verify-draw"}, {"collect"}, {"page", "check"}} {
		for _, s := range helpSettings(t, cmd...) {
			known[s.flag] = true
		}
	}
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(files) < 5 {
		t.Fatalf("docs: %v %v", files, err)
	}
	flagRE := regexp.MustCompile("`(?:usher [a-z-]+ [^`]*)?--([a-z][a-z0-9-]+)")
	for _, f := range append(files, "../../README.md") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range flagRE.FindAllStringSubmatch(string(b), -1) {
			if !known[m[1]] && otherToolsFlags[m[1]] == "" {
				t.Errorf("%s names --%s, which no usher command has", filepath.Base(f), m[1])
			}
		}
	}
}

// TestConfigurationNamesOwnVariables: where docs/configuration.md says a
// serve flag also applies to proxy or auth, it names the variable that
// command reads (USHER_PROXY_…), not only serve's.
func TestConfigurationNamesOwnVariables(t *testing.T) {
	doc := readDoc(t, "docs/configuration.md")
	for _, cmd := range []string{"proxy", "auth"} {
		for _, s := range helpSettings(t, cmd) {
			if !strings.HasPrefix(s.env, "USHER_"+strings.ToUpper(cmd)+"_") {
				continue
			}
			for line := range strings.Lines(doc) {
				if strings.HasPrefix(line, "| `--"+s.flag+"` |") && strings.Contains(line, "Also ") && strings.Contains(line, "`"+cmd+"`") &&
					!strings.Contains(line, "`"+s.env+"`") {
					t.Errorf("docs/configuration.md says --%s also applies to %s, but not that %s reads %s", s.flag, cmd, cmd, s.env)
				}
			}
		}
	}
}

// TestDocsLinksResolve: every relative link in the docs and the README, and
// every docs/…md#anchor a source file (Go, Lua, scripts, deploy
// files) cites, names a file that exists and,
// with an anchor, a heading of that file.
func TestDocsLinksResolve(t *testing.T) {
	files, _ := filepath.Glob("../../docs/*.md")
	files = append(files, "../../README.md")
	headings := map[string]map[string]bool{} // clean path → anchors
	anchors := func(path string) map[string]bool {
		if h, ok := headings[path]; ok {
			return h
		}
		h := map[string]bool{}
		b, err := os.ReadFile(path)
		if err == nil {
			inCode := false
			for line := range strings.Lines(string(b)) {
				if strings.HasPrefix(line, "```") {
					inCode = !inCode
				}
				if !inCode && strings.HasPrefix(line, "#") {
					h[slug(strings.TrimLeft(strings.TrimSpace(line), "# "))] = true
				}
			}
		} else {
			h = nil
		}
		headings[path] = h
		return h
	}
	check := func(from, target string) {
		path, anchor, _ := strings.Cut(target, "#")
		full := filepath.Clean(filepath.Join(filepath.Dir(from), path))
		if path == "" {
			full = filepath.Clean(from)
		}
		if !strings.HasSuffix(full, ".md") {
			if _, err := os.Stat(full); err != nil {
				t.Errorf("%s links %s, which does not exist", from, target)
			}
			return
		}
		h := anchors(full)
		switch {
		case h == nil:
			t.Errorf("%s links %s, which does not exist", from, target)
		case anchor != "" && !h[anchor]:
			t.Errorf("%s links %s, which has no heading #%s", from, target, anchor)
		}
	}
	linkRE := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range linkRE.FindAllStringSubmatch(string(b), -1) {
			if strings.Contains(m[1], "://") || strings.HasPrefix(m[1], "mailto:") {
				continue
			}
			check(f, m[1])
		}
	}
	citeRE := regexp.MustCompile(`docs/([a-z0-9-]+\.md)(#[a-z0-9-]+)?`)
	filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		switch filepath.Ext(path) {
		case ".go", ".sh", ".yml", ".yaml", ".json", ".lua", ".tmpl":
		default:
			return nil
		}
		b, _ := os.ReadFile(path)
		for _, m := range citeRE.FindAllStringSubmatch(string(b), -1) {
			check(filepath.Join("../../docs", "cited-in-"+filepath.Base(path)), m[1]+m[2])
		}
		return nil
	})
}

// slug is GitHub's anchor for a heading: lower case, punctuation dropped,
// spaces to hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
