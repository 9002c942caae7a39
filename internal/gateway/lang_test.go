package gateway

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/text/feature/plural"

	"usher/internal/wire"
)

func TestNegotiate(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("ru;q=0.9, ", 200) + "ko" // past maxAcceptLanguage
	many := strings.Repeat("x, ", maxLangEntries) + "ko"
	for _, c := range []struct {
		header   string
		fallback string
		want     string
	}{
		{"", "en", "en"},
		{"", "ko", "ko"},
		{"ko", "en", "ko"},
		{"ko-KR,ko;q=0.9,en-US;q=0.8,en;q=0.7", "en", "ko"}, // Chrome in Korea
		{"en-US,en;q=0.9,ko;q=0.8", "en", "en"},
		{"ru-RU, sw", "en", "en"},                  // none shipped: the fallback
		{"ru-RU, sw", "ko", "ko"},                  // another fallback
		{"ru, ko;q=0.5, en;q=0.4", "en", "ko"},     // the best shipped one
		{"en;q=0.5, ko;q=0.8", "en", "ko"},         // q, not order
		{"ko;q=0.8, en;q=0.8", "en", "ko"},         // a tie: the earlier
		{"KO-kr", "en", "ko"},                      // case-insensitive
		{"ko;q=0", "en", "en"},                     // refused
		{"ko;q=0, *", "en", "en"},                  // the wildcard is the fallback
		{"en;q=0, *", "en", "ko"},                  // ... unless the fallback is refused
		{"*", "ko", "ko"},                          //
		{"*;q=0.1, ko;q=0.5", "en", "ko"},          // an explicit language beats a lower wildcard
		{"ko;q=0.1, *;q=0.5", "en", "en"},          // a higher wildcard: the fallback
		{"ko;q=2", "en", "en"},                     // a q above 1 is malformed: skipped
		{"ko;q=0.0001", "en", "en"},                // four decimals: malformed
		{"ko;q=abc, en;q=0.1", "ko", "en"},         // malformed skipped, the rest counts
		{"ko;q=1.", "en", "ko"},                    // "1." is a qvalue
		{"ko;level=1;q=0.9, en;q=0.8", "en", "ko"}, // another parameter is ignored
		{"k<o>, ko_KR, -ko", "en", "en"},           // not language tags
		{"korean", "en", "en"},                     // a primary subtag that is not ko
		{",,, ;q=1, ko", "en", "ko"},               // empty entries
		{long, "en", "en"},                         // the ko past the bound is not read
		{"ko;q=0.1, " + long, "en", "ko"},          // what is within it counts
		{many, "en", "en"},                         // past maxLangEntries
		{strings.Repeat("k", 5000), "en", "en"},    // one huge entry
	} {
		if got := negotiate([]string{c.header}, Languages, c.fallback); got != c.want {
			t.Errorf("negotiate(%.60q, fallback %s) = %s, want %s", c.header, c.fallback, got, c.want)
		}
	}
	// Several header lines count as one list.
	if got := negotiate([]string{"ru", "ko;q=0.5"}, Languages, "en"); got != "ko" {
		t.Errorf("two Accept-Language lines: %s, want ko", got)
	}
}

// FuzzNegotiate: any header gets a shipped language, never a panic.
func FuzzNegotiate(f *testing.F) {
	for _, s := range []string{"ko-KR,ko;q=0.9", "*;q=0", "en;q=0,ko;q=0", ";;;,=q", "ko;q=1.000;q=0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		if got := negotiate([]string{header}, Languages, "en"); !slices.Contains(Languages, got) {
			t.Fatalf("negotiate(%q) = %q", header, got)
		}
	})
}

func TestParseLang(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want langPolicy
	}{
		{"", langPolicy{fallback: "en"}},
		{"auto", langPolicy{fallback: "en"}},
		{"auto:ko", langPolicy{fallback: "ko"}},
		{"auto:en", langPolicy{fallback: "en"}},
		{"auto:zh-Hant", langPolicy{fallback: "zh-Hant"}},
		{"ja", langPolicy{forced: "ja"}},
		{"en", langPolicy{forced: "en"}},
		{"ko", langPolicy{forced: "ko"}},
	} {
		if got, err := parseLang(c.in); err != nil || got != c.want {
			t.Errorf("parseLang(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"ru", "auto:", "auto:ru", "autoko", "KO", "zh", "zh-hans", "auto:ko:en"} {
		if _, err := parseLang(in); err == nil || !strings.Contains(err.Error(), "en, ko") {
			t.Errorf("parseLang(%q): err = %v, want the choices", in, err)
		}
	}
}

// TestWaitingPageLanguage: with the default setting each browser gets the
// page in its language, in one proxy, with Vary: Accept-Language; a forced
// language ignores the header and does not vary.
func TestWaitingPageLanguage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{})
	e.admit("sale", "occupant", time.Time{})
	for _, c := range []struct {
		accept, lang, want string
	}{
		{"ko-KR,ko;q=0.9,en-US;q=0.8", "ko", "대기 중입니다"},
		{"en-US,en;q=0.9", "en", "You are in line"},
		{"fr-FR", "fr", "Vous êtes dans la file d’attente"},
		{"zh-TW,zh;q=0.9", "zh-Hant", "您正在排隊"},
		{"zh-CN,zh;q=0.9", "zh-Hans", "您正在排队"},
		{"pt-BR", "pt", "Você está na fila"},
		{"ru-RU", "en", "You are in line"},
		{"", "en", "You are in line"},
	} {
		h := map[string]string{}
		if c.accept != "" {
			h["Accept-Language"] = c.accept
		}
		b := browser(t)
		do(t, b, "GET", e.url+"/shop", h)
		res := do(t, b, "GET", e.url+"/shop", h)
		if res.status != http.StatusTooManyRequests || !strings.Contains(res.body, `<html lang="`+c.lang+`" dir="ltr">`) || !strings.Contains(res.body, c.want) {
			t.Errorf("Accept-Language %q: %d, want the %s page with %q:\n%.400s", c.accept, res.status, c.lang, c.want, res.body)
		}
		if got := res.header.Values("Vary"); !slices.Contains(got, "Accept-Language") {
			t.Errorf("Accept-Language %q: Vary %v, want Accept-Language", c.accept, got)
		}
		if got := res.header.Get("Content-Language"); got != c.lang {
			t.Errorf("Accept-Language %q: Content-Language %q, want %s", c.accept, got, c.lang)
		}
	}

	forced := newEnv(t, newOrigin(t, helloOrigin), Rules{}, func(c *Config) { c.Lang = "en" })
	forced.admit("sale", "occupant", time.Time{})
	h := map[string]string{"Accept-Language": "ko"}
	b := browser(t)
	do(t, b, "GET", forced.url+"/shop", h)
	res := do(t, b, "GET", forced.url+"/shop", h)
	if !strings.Contains(res.body, `<html lang="en" dir="ltr">`) || slices.Contains(res.header.Values("Vary"), "Accept-Language") {
		t.Errorf("--lang en, a Korean browser: Vary %v, want the English page without Vary: Accept-Language:\n%.300s", res.header.Values("Vary"), res.body)
	}
}

func TestShippedFor(t *testing.T) {
	t.Parallel()
	for tag, want := range map[string]string{
		"zh-cn": "zh-Hans", "zh-sg": "zh-Hans", "zh": "zh-Hans", "zh-hans": "zh-Hans", "zh-hans-hk": "zh-Hans",
		"zh-tw": "zh-Hant", "zh-hk": "zh-Hant", "zh-mo": "zh-Hant", "zh-hant": "zh-Hant", "zh-hant-cn": "zh-Hant", "yue": "zh-Hant",
		"pt-br": "pt", "pt-pt": "pt", "es-419": "es", "es-mx": "es", "fr-ca": "fr", "de-at": "de", "en-gb": "en",
		"ja-jp": "ja", "ko-kr": "ko", "vi-vn": "vi", "th-th": "th", "id-id": "id", "in": "id",
		"ru": "", "zhx": "", "j": "", "": "",
	} {
		if got := shippedFor(tag, Languages); got != want {
			t.Errorf("shippedFor(%q) = %q, want %q", tag, got, want)
		}
	}
	// A q=0 refuses the language the tag reads, not its neighbour.
	if got := negotiate([]string{"zh-TW;q=0, zh-CN;q=0.5"}, Languages, "en"); got != "zh-Hans" {
		t.Errorf("zh-TW refused, zh-CN asked: %s, want zh-Hans", got)
	}
}

// TestPlural: the counts come in their language's CLDR plural form.
func TestPlural(t *testing.T) {
	t.Parallel()
	text := map[string]Text{}
	for _, l := range Languages {
		var err error
		if text[l], err = loadText(l); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		lang  string
		ahead int64
		want  string
	}{
		{"en", 0, "0 people ahead of you"}, {"en", 1, "1 person ahead of you"}, {"en", 2, "2 people ahead of you"},
		{"fr", 0, "0 personne devant vous"}, {"fr", 1, "1 personne devant vous"}, {"fr", 2, "2 personnes devant vous"},
		{"pt", 0, "0 pessoa à sua frente"}, {"pt", 21, "21 pessoas à sua frente"},
		{"de", 1, "1 Person vor Ihnen"}, {"de", 1_000_000, "1000000 Personen vor Ihnen"},
		{"es", 1, "Hay 1 persona delante de ti"}, {"es", 11, "Hay 11 personas delante de ti"},
		{"ko", 1, "앞에 1명이 있습니다"}, {"ja", 1, "あなたの前に1人が並んでいます"},
	} {
		if got := aheadText(text[c.lang], c.ahead); got != c.want {
			t.Errorf("aheadText(%s, %d) = %q, want %q", c.lang, c.ahead, got, c.want)
		}
	}
	for _, c := range []struct {
		lang string
		secs int64
		want string
	}{
		{"en", 60, "about 1 minute"}, {"fr", 60, "environ 1 minute"}, {"de", 120, "etwa 2 Minuten"}, {"zh-Hant", 120, "約 2 分鐘"},
	} {
		e := wire.Entry{ETASeconds: c.secs, ETARangeSeconds: [2]int64{c.secs, c.secs}}
		if got := entryETA(text[c.lang], e); got != c.want {
			t.Errorf("entryETA(%s, %ds) = %q, want %q", c.lang, c.secs, got, c.want)
		}
	}
	// The script counts the challenge's tries against an expected 2^bits
	// without plural rules: "other" in every shipped language.
	for _, l := range Languages {
		for bits := 1; bits < 63; bits++ {
			if f := pluralForm(text[l].tag, 1<<bits); f != plural.Other {
				t.Errorf("%s: 2^%d is plural form %v, want other (challenge_count)", l, bits, f)
			}
		}
	}
}

// TestParseTextPlurals: a set must give exactly the forms its language
// uses.
func TestParseTextPlurals(t *testing.T) {
	t.Parallel()
	b, err := pages.ReadFile("page/text/en.json")
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ from, to, want string }{
		"one missing":    {`"one": "%d person ahead of you", `, ``, "ahead gives the plural forms [other]; en uses [one other]"},
		"few extra":      {`"other": "%d people ahead of you"`, `"other": "%d people ahead of you", "few": "%d"`, "ahead gives the plural forms [one few other]"},
		"range with one": {`{"other": "about %d–%d minutes"}`, `{"one": "x", "other": "about %d–%d minutes"}`, "eta_range gives the plural forms [one other]; en uses [other]"},
		"not a form":     {`"other": "%d people ahead of you"`, `"other": "%d people ahead of you", "plenty": "x"`, `unknown field "plenty"`},
		"wrong dir":      {`"dir": "ltr"`, `"dir": "down"`, `dir "down"`},
	} {
		changed := strings.Replace(string(b), c.from, c.to, 1)
		if changed == string(b) {
			t.Fatalf("%s: %q not in en.json", name, c.from)
		}
		if _, err := parseText("en", []byte(changed)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", name, err, c.want)
		}
	}
}

// TestLangChooser: the page links every shipped language; a link sets the
// visitor's choice, which wins over Accept-Language in the page and in
// the JSON answers' words; a bad choice sets nothing, a way back off the
// site is cut to its path, and a forced language shows no links and
// ignores the cookie.
func TestLangChooser(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{})
	e.admit("sale", "occupant", time.Time{})
	ko := map[string]string{"Accept-Language": "ko-KR,ko;q=0.9"}
	b := browser(t)
	do(t, b, "GET", e.url+"/shop?a=1", ko)
	page := do(t, b, "GET", e.url+"/shop?a=1", ko)
	for _, want := range []string{
		`<nav class="langs" aria-label="언어">`,
		`<a href="/_usher/lang?lang=ja&amp;to=%2Fshop%3Fa%3D1" lang="ja" hreflang="ja">日本語</a>`,
		`lang="ko" hreflang="ko" aria-current="true">한국어</a>`,
		`lang="zh-Hant" hreflang="zh-Hant">繁體中文</a>`,
	} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the Korean page lacks %s", want)
		}
	}
	if n := strings.Count(page.body, `href="/_usher/lang?`); n != len(Languages) {
		t.Errorf("%d language links, want %d", n, len(Languages))
	}

	noFollow := &http.Client{Jar: b.Jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res := do(t, noFollow, "GET", e.url+LangPath+"?lang=ja&to=%2Fshop%3Fa%3D1", nil)
	if res.status != http.StatusSeeOther || res.header.Get("Location") != "/shop?a=1" || !strings.Contains(res.header.Get("Set-Cookie"), "usher_lang=ja;") {
		t.Errorf("choose ja: %d Location %q Set-Cookie %q, want 303 to /shop?a=1 with usher_lang=ja", res.status, res.header.Get("Location"), res.header.Get("Set-Cookie"))
	}
	page = do(t, b, "GET", e.url+"/shop?a=1", ko)
	if !strings.Contains(page.body, `<html lang="ja" dir="ltr">`) || page.header.Get("Content-Language") != "ja" {
		t.Errorf("after choosing ja, a Korean browser: Content-Language %q:\n%.300s", page.header.Get("Content-Language"), page.body)
	}
	req, _ := http.NewRequest("GET", e.url+"/shop", nil)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Accept-Language", "ko")
	poll, err := b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var entry wire.Entry
	if err := json.NewDecoder(poll.Body).Decode(&entry); err != nil {
		t.Fatal(err)
	}
	poll.Body.Close()
	if entry.AheadText != "あなたの前に0人が並んでいます" && entry.AheadText != "あなたの前に1人が並んでいます" || !strings.HasPrefix(entry.ETAText, "1分") && !strings.HasPrefix(entry.ETAText, "約") {
		t.Errorf("JSON poll after choosing ja: ahead_text %q, eta_text %q, want Japanese", entry.AheadText, entry.ETAText)
	}

	for target, want := range map[string]int{
		"?lang=xx&to=/shop":      http.StatusBadRequest,
		"?lang=JA&to=/shop":      http.StatusBadRequest,
		"?to=/shop":              http.StatusBadRequest,
		"?lang=ja%3Bpath%3D%2Fx": http.StatusBadRequest,
	} {
		res := do(t, noFollow, "GET", e.url+LangPath+target, nil)
		if res.status != want || res.header.Get("Set-Cookie") != "" {
			t.Errorf("%s: %d Set-Cookie %q, want %d and no cookie", target, res.status, res.header.Get("Set-Cookie"), want)
		}
	}
	for to, want := range map[string]string{
		"https://evil.example/x?y=1": "/x?y=1",
		"//evil.example/x":           "/x",
		"":                           "/",
	} {
		res := do(t, noFollow, "GET", e.url+LangPath+"?lang=fr&to="+url.QueryEscape(to), nil)
		if res.status != http.StatusSeeOther || res.header.Get("Location") != want {
			t.Errorf("to %q: %d Location %q, want 303 to %s", to, res.status, res.header.Get("Location"), want)
		}
	}
	if res := do(t, noFollow, "POST", e.url+LangPath+"?lang=fr", nil); res.status != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", res.status)
	}

	// A cookie naming no shipped language is ignored.
	other := browser(t)
	u, _ := url.Parse(e.url)
	other.Jar.SetCookies(u, []*http.Cookie{{Name: wire.LangCookie, Value: "xx"}})
	do(t, other, "GET", e.url+"/shop", ko)
	if page := do(t, other, "GET", e.url+"/shop", ko); !strings.Contains(page.body, `<html lang="ko" dir="ltr">`) {
		t.Errorf("usher_lang=xx, a Korean browser: want the Korean page:\n%.200s", page.body)
	}

	forced := newEnv(t, newOrigin(t, helloOrigin), Rules{}, func(c *Config) { c.Lang = "de" })
	forced.admit("sale", "occupant", time.Time{})
	fb := browser(t)
	fu, _ := url.Parse(forced.url)
	fb.Jar.SetCookies(fu, []*http.Cookie{{Name: wire.LangCookie, Value: "ja"}})
	do(t, fb, "GET", forced.url+"/shop", nil)
	if page := do(t, fb, "GET", forced.url+"/shop", nil); !strings.Contains(page.body, `<html lang="de" dir="ltr">`) || strings.Contains(page.body, `class="langs"`) {
		t.Errorf("--lang de with usher_lang=ja: want the German page without language links:\n%.300s", page.body)
	}
}

// TestAuthServesLang: behind nginx or Caddy the language links go to usher
// auth, which answers them as the proxy does.
func TestAuthServesLang(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, Rules{})
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res := do(t, noFollow, "GET", e.url+LangPath+"?lang=th&to=%2Fshop", nil)
	if res.status != http.StatusSeeOther || res.header.Get("Location") != "/shop" || !strings.Contains(res.header.Get("Set-Cookie"), "usher_lang=th;") {
		t.Errorf("usher auth, choose th: %d Location %q Set-Cookie %q", res.status, res.header.Get("Location"), res.header.Get("Set-Cookie"))
	}
}
