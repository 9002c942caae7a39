package gateway

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
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
