package gateway

import (
	"bytes"
	"encoding/base64"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// writeFiles writes name → content under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// pngLogo is a 1×1 PNG.
var pngLogo, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg==")

const goodBrand = `{
  "site_name": "Example <Tickets>",
  "logo": "logo.png",
  "colors": {"accent": "#0b5394", "background": "#fdf6e3", "text": "#222"},
  "text": {
    "en": {"title": "You are in line for Example Fest", "keep": "Stay <b onmouseover=x>here</b>", "ahead": {"one": "%d fan ahead of you", "other": "%d fans ahead of you"}},
    "ko": {"title": "Example Fest 대기열에 있습니다"}
  }
}`

func TestPageDirBrandShows(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"brand.json": goodBrand, "logo.png": string(pngLogo)})
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{}, func(c *Config) { c.PageDir = dir })
	e.admit("sale", "occupant", time.Time{})
	c := browser(t)
	do(t, c, "GET", e.url+"/shop", nil) // takes place 1
	res := do(t, browser(t), "GET", e.url+"/shop", nil)
	for _, want := range []string{
		"You are in line for Example Fest – Example &lt;Tickets&gt;</title>",
		`<p class="site">Example &lt;Tickets&gt;</p>`,
		`<img class="logo" src="data:image/png;base64,` + base64.StdEncoding.EncodeToString(pngLogo) + `" alt="">`,
		"1 fan ahead of you",
		"body{background:#fdf6e3;color:#222}",
		".button{background:#0b5394;color:#ffffff}",
		"<p>Stay &lt;b onmouseover=x&gt;here&lt;/b&gt;</p>",
	} {
		if !strings.Contains(res.body, want) {
			t.Errorf("branded page lacks %q:\n%s", want, res.body)
		}
	}
	if strings.Contains(res.body, "<b onmouseover") {
		t.Errorf("a brand's text reached the page unescaped:\n%s", res.body)
	}
	ko := do(t, browser(t), "GET", e.url+"/shop", map[string]string{"Accept-Language": "ko"})
	if !strings.Contains(ko.body, "Example Fest 대기열에 있습니다") {
		t.Errorf("Korean page lacks its override:\n%s", ko.body)
	}
	if fr := do(t, browser(t), "GET", e.url+"/shop", map[string]string{"Accept-Language": "fr"}); !strings.Contains(fr.body, "Vous") {
		t.Errorf("French page lost its shipped texts:\n%s", fr.body)
	}
}

func TestPageDirRefuses(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	writeFiles(t, outside, map[string]string{"secret.png": string(pngLogo)})
	for _, c := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"unknown brand key", map[string]string{"brand.json": `{"site": "x"}`}, `unknown field "site"`},
		{"bad colour", map[string]string{"brand.json": `{"colors": {"accent": "red"}}`}, `colors.accent "red": want #rgb or #rrggbb`},
		{"css in a colour", map[string]string{"brand.json": `{"colors": {"text": "#000;}body{x:y"}}`}, "want #rgb"},
		{"poor contrast", map[string]string{"brand.json": `{"colors": {"text": "#999"}}`}, "text on surface contrasts"},
		{"javascript logo", map[string]string{"brand.json": `{"site_name": "x", "logo": "javascript:alert(1)"}`}, "want a file in the page directory, an https:// URL"},
		{"http logo", map[string]string{"brand.json": `{"site_name": "x", "logo": "http://cdn.example/l.png"}`}, "https://"},
		{"protocol-relative logo", map[string]string{"brand.json": `{"site_name": "x", "logo": "//evil.example/l.png"}`}, "https://"},
		{"logo outside", map[string]string{"brand.json": `{"site_name": "x", "logo": "../secret.png"}`}, "inside the page directory"},
		{"logo without text", map[string]string{"brand.json": `{"logo": "https://cdn.example/l.png"}`}, "logo_alt"},
		{"logo not an image", map[string]string{"brand.json": `{"site_name": "x", "logo": "l.png"}`, "l.png": "<script>"}, "not image/png"},
		{"unknown text key", map[string]string{"brand.json": `{"text": {"en": {"titel": "x"}}}`}, "text.en.titel: no such text key"},
		{"lang not overridable", map[string]string{"brand.json": `{"text": {"en": {"lang": "fr"}}}`}, "text.en.lang: no such text key"},
		{"unknown language", map[string]string{"brand.json": `{"text": {"xx": {"title": "x"}}}`}, "text.xx: want a shipped language"},
		{"lost verb", map[string]string{"brand.json": `{"text": {"en": {"turn_left": "Go on"}}}`}, "text.en.turn_left: has the formats"},
		{"wrong plural forms", map[string]string{"brand.json": `{"text": {"ko": {"ahead": {"one": "%d", "other": "%d"}}}}`}, "plural forms"},
		{"broken template", map[string]string{"waiting.html": "{{.Nope"}, "waiting.html"},
		{"template with a missing field", map[string]string{"waiting.html": "{{.Nope}}"}, "can't evaluate field Nope"},
		{"text set of another language", map[string]string{"text/xx.json": "{}"}, "text/xx.json: want <lang>.json"},
		{"incomplete text set", map[string]string{"text/en.json": `{"lang": "en", "dir": "ltr"}`}, "text/en.json: text set en: name is missing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(outside, strings.ReplaceAll(c.name, " ", "-"))
			writeFiles(t, dir, c.files)
			_, err := LoadPages(dir, "", nil, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one with %q", err, c.want)
			}
		})
	}
}

// A symbolic link does not take the logo out of the directory.
func TestPageDirSymlinkConfined(t *testing.T) {
	t.Parallel()
	outside, dir := t.TempDir(), t.TempDir()
	writeFiles(t, outside, map[string]string{"secret.png": string(pngLogo)})
	if err := os.Symlink(filepath.Join(outside, "secret.png"), filepath.Join(dir, "logo.png")); err != nil {
		t.Skip(err)
	}
	writeFiles(t, dir, map[string]string{"brand.json": `{"site_name": "x", "logo": "logo.png"}`})
	if _, err := LoadPages(dir, "", nil, nil); err == nil {
		t.Error("a logo linked from outside the directory was read")
	}
}

// A change is picked up by Reload; a broken change keeps the last good
// pages, says why, and is counted; mending it puts it in use.
func TestPageDirReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"brand.json": `{"site_name": "First"}`})
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	p, err := LoadPages(dir, "", reg, newTextLogger(&logs))
	if err != nil {
		t.Fatal(err)
	}
	show := func() string {
		var b strings.Builder
		if err := p.Render(&b, "", "en", StateWaiting); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if !strings.Contains(show(), "First") {
		t.Fatal("the brand's name is not shown")
	}
	if err := p.Reload(); err != nil || value(t, p.reloads.WithLabelValues("ok")) != 0 {
		t.Errorf("Reload without a change: %v, and counted as one", err)
	}

	writeFiles(t, dir, map[string]string{"brand.json": `{"site_name": "Second"}`, "waiting.html": `<!doctype html><title>{{.T.Title}}</title><p>{{.SiteName}} #{{.Position}}</p>`})
	if err := p.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if got := show(); !strings.Contains(got, "<p>Second #3</p>") {
		t.Errorf("after the change: %s", got)
	}

	writeFiles(t, dir, map[string]string{"waiting.html": `{{.Broken`})
	err = p.Reload()
	if err == nil || !strings.Contains(err.Error(), "waiting.html") || p.Err() == nil {
		t.Errorf("broken template: Reload = %v, Err = %v", err, p.Err())
	}
	if got := show(); !strings.Contains(got, "<p>Second #3</p>") {
		t.Errorf("a broken change replaced the last good page: %s", got)
	}
	if got := value(t, p.ok); got != 0 {
		t.Errorf("usher_page_dir_ok = %v after a refused change, want 0", got)
	}
	if !strings.Contains(logs.String(), "last good pages stay") || !strings.Contains(logs.String(), "waiting.html") {
		t.Errorf("the refusal was not logged with its reason: %s", logs.String())
	}
	if err := os.Remove(filepath.Join(dir, "waiting.html")); err != nil {
		t.Fatal(err)
	}
	if err := p.Reload(); err != nil || p.Err() != nil {
		t.Fatalf("mended: Reload = %v, Err = %v", err, p.Err())
	}
	if got := show(); !strings.Contains(got, `<p class="site">Second</p>`) {
		t.Errorf("after removing the template, the shipped one with the brand: %s", got)
	}
	if ok, bad := value(t, p.reloads.WithLabelValues("ok")), value(t, p.reloads.WithLabelValues("error")); ok != 2 || bad != 1 || value(t, p.ok) != 1 {
		t.Errorf("reloads ok %v error %v, dir ok %v; want 2, 1, 1", ok, bad, value(t, p.ok))
	}
}

// The proxy serves what a reload put in use, without a restart.
func TestPageDirReloadServed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{}, func(c *Config) { c.PageDir = dir })
	e.admit("sale", "occupant", time.Time{})
	if res := do(t, browser(t), "GET", e.url+"/shop", nil); strings.Contains(res.body, `class="site"`) {
		t.Fatalf("an empty directory shows a brand:\n%s", res.body)
	}
	writeFiles(t, dir, map[string]string{"brand.json": `{"site_name": "Reloaded"}`})
	if err := e.p.Pages().Reload(); err != nil {
		t.Fatal(err)
	}
	if res := do(t, browser(t), "GET", e.url+"/shop", nil); !strings.Contains(res.body, `<p class="site">Reloaded</p>`) {
		t.Errorf("the reloaded brand is not served:\n%s", res.body)
	}
}

// A template given both ways is refused: one source of truth.
func TestPageDirAndTemplate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"waiting.html": "x", "other.html": "y"})
	if _, err := LoadPages(dir, filepath.Join(dir, "other.html"), nil, nil); err == nil || !strings.Contains(err.Error(), "use one") {
		t.Errorf("err = %v, want the conflict named", err)
	}
}

func newTextLogger(w *bytes.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// value is a counter's or gauge's value.
func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

// A directory that goes away keeps the last good pages, and is told
// once, not at every poll.
func TestPageDirGone(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "pages")
	writeFiles(t, dir, map[string]string{"brand.json": `{"site_name": "Kept"}`})
	p, err := LoadPages(dir, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := p.Reload(); err == nil {
			t.Fatal("a removed directory reloaded")
		}
	}
	if n := value(t, p.reloads.WithLabelValues("error")); n != 1 {
		t.Errorf("%v refusals counted for one reason, want 1", n)
	}
	var b strings.Builder
	if err := p.Render(&b, "", "en", StateWaiting); err != nil || !strings.Contains(b.String(), "Kept") {
		t.Errorf("the last good pages are gone: %v", err)
	}
}

// A room's directory (rooms/<room>/) gives that room its own page; the
// other rooms keep the directory's.
func TestPageDirRooms(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"brand.json":           `{"site_name": "Main Site"}`,
		"rooms/vip/brand.json": `{"site_name": "VIP Presale", "logo": "vip.png", "text": {"en": {"title": "You are in the VIP line", "ahead": {"one": "%d VIP ahead", "other": "%d VIPs ahead"}}}}`,
		"rooms/vip/vip.png":    string(pngLogo),
	})
	if err := os.MkdirAll(filepath.Join(dir, "rooms", "empty"), 0o755); err != nil { // changes nothing
		t.Fatal(err)
	}
	route, err := ParseRoute("/vip/=vip")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{Routes: []Route{route}}, func(c *Config) { c.PageDir = dir })
	e.admit("sale", "occupant", time.Time{})
	e.admit("vip", "occupant", time.Time{})
	vip := do(t, browser(t), "GET", e.url+"/vip/tickets", nil)
	for _, want := range []string{"You are in the VIP line – VIP Presale</title>", `<p class="site">VIP Presale</p>`, `src="data:image/png;base64,`} {
		if !strings.Contains(vip.body, want) {
			t.Errorf("the vip room's page lacks %q:\n%s", want, vip.body)
		}
	}
	if json := do(t, browser(t), "GET", e.url+"/vip/tickets", map[string]string{"Accept": "application/json"}); !strings.Contains(json.body, `"ahead_text":"1 VIP ahead"`) {
		t.Errorf("the vip room's JSON answer: %s", json.body)
	}
	sale := do(t, browser(t), "GET", e.url+"/shop", nil)
	if !strings.Contains(sale.body, `<p class="site">Main Site</p>`) || strings.Contains(sale.body, "VIP") {
		t.Errorf("the sale room's page is not the directory's:\n%s", sale.body)
	}
	if got := e.p.Pages().Rooms(); len(got) != 1 || got[0] != "vip" {
		t.Errorf("Rooms() = %v, want [vip]", got)
	}

	for name, files := range map[string]map[string]string{
		"rooms/Bad_Room: want a directory named for a room": {"rooms/Bad_Room/brand.json": "{}"},
		"rooms/file: want a directory":                      {"rooms/file": "x"},
		"rooms/vip: brand.json: colors.accent":              {"rooms/vip/brand.json": `{"colors": {"accent": "blue"}}`},
		"rooms/vip: waiting.html":                           {"rooms/vip/waiting.html": `{{.Nope}}`},
		"rooms/vip/brand.json: logo":                        {"rooms/vip/brand.json": `{"site_name": "x", "logo": "../../secret.png"}`, "secret.png": string(pngLogo)},
	} {
		bad := t.TempDir()
		writeFiles(t, bad, files)
		if _, err := LoadPages(bad, "", nil, nil); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%v: err = %v, want one with %q", files, err, name)
		}
	}
}
