package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"usher/internal/testenv"
)

// pageDir makes a page directory of files.
func pageDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const brandedDir = `{
  "site_name": "Example Tickets",
  "logo": "/static/logo.png",
  "logo_alt": "Example Tickets",
  "colors": {"accent": "#0b5394", "background": "#fdf6e3", "text": "#222222"},
  "text": {"en": {"title": "You are in line for Example Fest"}, "ja": {"title": "Example Fest の列に並んでいます"}}
}`

// usher page check accepts a good directory and refuses a bad one, saying
// why, without a browser.
func TestPageCheckFiles(t *testing.T) {
	good := pageDir(t, map[string]string{"brand.json": brandedDir})
	var out strings.Builder
	if err := run(context.Background(), []string{"page", "check", good}, noEnv, &out, &out); err != nil {
		t.Fatalf("good directory: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "the files are valid") || !strings.Contains(out.String(), "audit skipped") {
		t.Errorf("good directory, no axe: %s", out.String())
	}
	bad := pageDir(t, map[string]string{"brand.json": `{"colors": {"accent": "#ffff00"}}`})
	err := run(context.Background(), []string{"page", "check", bad}, noEnv, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "accent on surface contrasts") {
		t.Errorf("bad directory: err = %v, want the contrast named", err)
	}
	if err := run(context.Background(), []string{"page", "check"}, noEnv, &out, &out); err == nil {
		t.Error("no directory: accepted")
	}
}

// usher page check --axe audits the branded page in every language and
// fails on a template that breaks the rules.
func TestPageCheckAudit(t *testing.T) {
	testenv.Axe(t) // skips without it
	path := os.Getenv(testenv.AxeVar)
	chromium := testenv.Chromium(t)
	good := pageDir(t, map[string]string{"brand.json": brandedDir,
		"rooms/vip/brand.json": `{"site_name": "VIP", "colors": {"accent": "#7a1f5c", "surface": "#fffaf0"}}`})
	var out strings.Builder
	if err := run(context.Background(), []string{"page", "check", "--axe", path, "--chromium", chromium, good}, noEnv, &out, &out); err != nil {
		t.Fatalf("branded directory: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "40 pages") || !strings.Contains(out.String(), "no violations") {
		t.Errorf("branded directory: %s", out.String())
	}
	bad := pageDir(t, map[string]string{"rooms/vip/waiting.html": `<!doctype html><html><title>{{.T.Title}}</title><main><p style="color:#aaa;background:#bbb">{{.T.Keep}}</p></main></html>`})
	out.Reset()
	err := run(context.Background(), []string{"page", "check", "--axe", path, "--chromium", chromium, bad}, noEnv, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "violations") {
		t.Errorf("inaccessible template: err = %v", err)
	}
	for _, rule := range []string{"room vip, en, waiting: axe html-has-lang", "room vip, ko, waiting: axe color-contrast"} {
		if !strings.Contains(out.String(), rule) {
			t.Errorf("the report lacks %q:\n%s", rule, out.String())
		}
	}
}

// The brand.json of docs/operations.md passes usher page check.
func TestOperationsBrandExample(t *testing.T) {
	doc := readDoc(t, "docs/operations.md")
	_, sec, _ := strings.Cut(doc, "## The site's own look")
	_, example, _ := strings.Cut(sec, "```json\n")
	example, _, _ = strings.Cut(example, "```")
	if !strings.Contains(example, `"logo": "logo.svg"`) {
		t.Fatalf("no brand.json example with logo.svg in docs/operations.md:\n%s", example)
	}
	dir := pageDir(t, map[string]string{"brand.json": example,
		"logo.svg": `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>`})
	var out strings.Builder
	if err := run(context.Background(), []string{"page", "check", dir}, noEnv, &out, &out); err != nil {
		t.Errorf("the documented brand.json: %v", err)
	}
}

// usher proxy --page-dir serves the brand, and the reload loop it runs
// picks up a change without a restart.
func TestProxyPageDir(t *testing.T) {
	t.Parallel()
	dir := pageDir(t, map[string]string{"brand.json": `{"site_name": "First Site"}`})
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "origin") }))
	defer origin.Close()
	base := startProxy(t, nil, "--addr", "127.0.0.1:0", "--origin", origin.URL, "--data-dir", testenv.DataDir(t),
		"--admin-key", proxyAdminKey, "--insecure-cookies", "--page-dir", dir)
	c := client{t, base}
	if st, _, body := c.admin().do("PUT", "/api/v1/rooms/sale", proxyAdminKey, `{"state":"paused"}`); st != 200 {
		t.Fatalf("pause the room: %d %v", st, body)
	}
	if st, body := get(t, newBrowser(t), base+"/shop"); st != http.StatusTooManyRequests || !strings.Contains(body, `<p class="site">First Site</p>`) {
		t.Fatalf("waiting page: %d, want the brand:\n%s", st, body)
	}
	pageDirWrite(t, dir, `{"site_name": "Second Site"}`)
	testenv.Eventually(t, time.Minute, "the changed brand served", func() bool {
		_, body := get(t, newBrowser(t), base+"/shop")
		return strings.Contains(body, `<p class="site">Second Site</p>`)
	})
}

func pageDirWrite(t *testing.T, dir, brand string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "brand.json"), []byte(brand), 0o600); err != nil {
		t.Fatal(err)
	}
}
