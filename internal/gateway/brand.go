package gateway

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"maps"
	"math"
	"net/http"
	"net/url"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Brand is a page directory's brand.json: the common case of a site's own
// look, without a template. Every field is optional.
//
//	{
//	  "site_name": "Example Tickets",
//	  "logo": "logo.svg",
//	  "colors": {"accent": "#0b5394", "background": "#fdf6e3"},
//	  "text": {"en": {"title": "You are in line for Example Fest"}}
//	}
type Brand struct {
	// SiteName is shown above the title and after it in the tab.
	SiteName string `json:"site_name"`
	// Logo is a file in the directory (png, jpeg, gif, webp or svg, at
	// most 64 KiB, inlined in the page), an https URL, or a path on the
	// site ("/static/logo.png").
	Logo string `json:"logo"`
	// LogoAlt is the logo's text for screen readers; without it the
	// logo is decorative when SiteName is shown, and refused otherwise.
	LogoAlt string      `json:"logo_alt"`
	Colors  BrandColors `json:"colors"`
	// Text overrides texts of the shipped keys (en.json's), by language:
	// a text keeps the fmt verbs (%d, %s) of the one it replaces, and
	// plural forms are given as the language's text set gives them.
	Text map[string]map[string]json.RawMessage `json:"text"`
}

// BrandColors are the page's colours as #rgb or #rrggbb; an unset one
// keeps the shipped light theme's. Any colour set pins the page to it (no
// dark variant). Text and accent must contrast 4.5:1 with the background
// and surface (WCAG 2.2 AA); the buttons' text is white or black,
// whichever contrasts more with the accent.
type BrandColors struct {
	Background string `json:"background"` // the page behind the card
	Surface    string `json:"surface"`    // the card
	Text       string `json:"text"`
	Accent     string `json:"accent"` // links, buttons, focus rings
}

// brandView is what a page shows of the brand.
type brandView struct {
	siteName, logoAlt string
	logo              template.URL
}

// parsedBrand is a checked brand: what it shows, its style and its texts.
type parsedBrand struct {
	view brandView
	css  template.CSS
	text map[string]map[string]json.RawMessage
}

// Bounds on a brand's values.
const (
	maxBrandName = 100
	maxLogo      = 64 << 10
	maxBrandText = 2000
)

// parseBrand checks a brand.json; files holds the logo when it is a file.
func parseBrand(b []byte, files pageFiles) (parsedBrand, error) {
	var br Brand
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&br); err != nil {
		return parsedBrand{}, fmt.Errorf("%w (keys: site_name, logo, logo_alt, colors, text)", err)
	}
	if dec.More() {
		return parsedBrand{}, fmt.Errorf("more than one JSON value")
	}
	var p parsedBrand
	for name, v := range map[string]string{"site_name": br.SiteName, "logo_alt": br.LogoAlt} {
		if len(v) > maxBrandName || strings.ContainsFunc(v, isControl) {
			return p, fmt.Errorf("%s: want at most %d characters of text on one line", name, maxBrandName)
		}
	}
	p.view.siteName, p.view.logoAlt = strings.TrimSpace(br.SiteName), strings.TrimSpace(br.LogoAlt)
	if br.Logo != "" {
		if p.view.siteName == "" && p.view.logoAlt == "" {
			return p, fmt.Errorf("logo: give logo_alt (or site_name), the logo's text for screen readers")
		}
		var err error
		if p.view.logo, err = logoURL(br.Logo, files); err != nil {
			return p, err
		}
	}
	css, err := br.Colors.css()
	if err != nil {
		return p, err
	}
	p.css = css
	p.text = br.Text
	return p, nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// logoIsFile reports whether a logo value names a file of the directory
// rather than a URL.
func logoIsFile(logo string) bool {
	return logo != "" && !strings.HasPrefix(logo, "/") && !strings.Contains(logo, ":")
}

// checkLogoName refuses a logo file name that leaves the directory.
func checkLogoName(name string) error {
	if !filepath.IsLocal(name) || strings.Contains(name, `\`) || path.Clean(name) != name {
		return fmt.Errorf("logo %q: want a file name inside the page directory", name)
	}
	return nil
}

var logoTypes = map[string]string{
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
	".gif": "image/gif", ".webp": "image/webp", ".svg": "image/svg+xml",
}

// logoURL is the logo's src: a file inlined as a data: URL, an https URL,
// or a same-origin path.
func logoURL(logo string, files pageFiles) (template.URL, error) {
	if logoIsFile(logo) {
		if err := checkLogoName(logo); err != nil {
			return "", err
		}
		mt, ok := logoTypes[strings.ToLower(path.Ext(logo))]
		if !ok {
			return "", fmt.Errorf("logo %q: want a .png, .jpg, .gif, .webp or .svg file", logo)
		}
		b, ok := files[logo]
		if !ok {
			return "", fmt.Errorf("logo %q: no such file in the page directory", logo)
		}
		if len(b) > maxLogo {
			return "", fmt.Errorf("logo %q: %d bytes, want at most %d KiB", logo, len(b), maxLogo>>10)
		}
		if got := http.DetectContentType(b); mt != "image/svg+xml" && got != mt {
			return "", fmt.Errorf("logo %q: the file is %s, not %s", logo, got, mt)
		}
		return template.URL("data:" + mt + ";base64," + base64.StdEncoding.EncodeToString(b)), nil
	}
	bad := fmt.Errorf("logo %q: want a file in the page directory, an https:// URL or a path on the site such as /static/logo.png", logo)
	if len(logo) > 2000 || strings.ContainsFunc(logo, func(r rune) bool {
		return r <= ' ' || r == 0x7f || r == '"' || r == '\'' || r == '<' || r == '>' || r == '\\'
	}) {
		return "", bad
	}
	u, err := url.Parse(logo)
	switch {
	case err != nil:
		return "", bad
	case strings.HasPrefix(logo, "/") && !strings.HasPrefix(logo, "//") && u.Scheme == "" && u.Host == "":
	case u.Scheme == "https" && u.Host != "" && u.User == nil:
	default:
		return "", bad
	}
	return template.URL(u.String()), nil
}

var colorRE = regexp.MustCompile(`^#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})$`)

// css is the style the colours add after the shipped one, "" when none
// is set.
func (c BrandColors) css() (template.CSS, error) {
	if c == (BrandColors{}) {
		return "", nil
	}
	cols := []struct {
		name string
		v    *string
		def  string
	}{{"background", &c.Background, "#f6f7f9"}, {"surface", &c.Surface, "#ffffff"}, {"text", &c.Text, "#1a1a1a"}, {"accent", &c.Accent, "#1a56db"}}
	lum := map[string]float64{}
	for _, col := range cols {
		if *col.v == "" {
			*col.v = col.def
		}
		if !colorRE.MatchString(*col.v) {
			return "", fmt.Errorf("colors.%s %q: want #rgb or #rrggbb", col.name, *col.v)
		}
		lum[col.name] = luminance(*col.v)
	}
	for _, fg := range []string{"text", "accent"} {
		for _, bg := range []string{"surface", "background"} {
			if r := contrast(lum[fg], lum[bg]); r < 4.5 {
				return "", fmt.Errorf("colors: %s on %s contrasts %.2f:1, want at least 4.5:1 (WCAG 2.2 AA)", fg, bg, r)
			}
		}
	}
	button, white := "#000000", contrast(1, lum["accent"])
	if white >= contrast(0, lum["accent"]) {
		button = "#ffffff"
	}
	if r := max(white, contrast(0, lum["accent"])); r < 4.5 {
		return "", fmt.Errorf("colors: accent %s gives its buttons' text %.2f:1 at best, want at least 4.5:1", c.Accent, r)
	}
	return template.CSS(fmt.Sprintf(`
:root{color-scheme:light}
body{background:%[1]s;color:%[3]s}
main{background:%[2]s}
.label,.muted{color:%[3]s}
a,.langs a[aria-current]{color:%[4]s}
.button{background:%[4]s;color:%[5]s}
a:focus-visible,.button:focus-visible{outline-color:%[4]s}
@keyframes usher-moved{from{color:%[4]s;transform:scale(1.08)}to{transform:none}}
`, c.Background, c.Surface, c.Text, c.Accent, button)), nil
}

// luminance is a #rgb or #rrggbb colour's relative luminance (WCAG).
func luminance(hex string) float64 {
	h := hex[1:]
	if len(h) == 3 {
		h = string([]byte{h[0], h[0], h[1], h[1], h[2], h[2]})
	}
	var l float64
	for i, w := range []float64{0.2126, 0.7152, 0.0722} {
		v, _ := strconv.ParseUint(h[2*i:2*i+2], 16, 8)
		c := float64(v) / 255
		if c <= 0.04045 {
			c /= 12.92
		} else {
			c = math.Pow((c+0.055)/1.055, 2.4)
		}
		l += w * c
	}
	return l
}

// contrast is the WCAG contrast ratio of two luminances.
func contrast(a, b float64) float64 { return (max(a, b) + 0.05) / (min(a, b) + 0.05) }

// textKeys are the keys of a text set a brand may override, by JSON name:
// every one but lang and dir.
var textKeys = func() map[string]reflect.Type {
	keys := map[string]reflect.Type{}
	t := reflect.TypeFor[Text]()
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("json")
		if f.IsExported() && name != "lang" && name != "dir" {
			keys[name] = f.Type
		}
	}
	return keys
}()

// apply overrides texts with the brand's wording, checking each override
// and the text set it makes.
func (p parsedBrand) apply(texts map[string]Text) (map[string]Text, error) {
	out := make(map[string]Text, len(texts))
	for l, t := range texts {
		out[l] = t
	}
	for _, l := range slices.Sorted(maps.Keys(p.text)) {
		over := p.text[l]
		base, ok := texts[l]
		if !ok {
			return nil, fmt.Errorf("text.%s: want a shipped language, one of %s", l, strings.Join(Languages, ", "))
		}
		raw, err := json.Marshal(base)
		if err != nil {
			return nil, err
		}
		var set map[string]json.RawMessage
		if err := json.Unmarshal(raw, &set); err != nil {
			return nil, err
		}
		for _, key := range slices.Sorted(maps.Keys(over)) {
			typ, ok := textKeys[key]
			if !ok {
				return nil, fmt.Errorf("text.%s.%s: no such text key (see page/text/en.json)", l, key)
			}
			if err := checkOverride(l, key, typ, set[key], over[key]); err != nil {
				return nil, err
			}
			set[key] = over[key]
		}
		merged, err := json.Marshal(set)
		if err != nil {
			return nil, err
		}
		if out[l], err = parseText(l, merged); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// checkOverride checks one override: a text (or plural forms) of at most
// maxBrandText characters with the fmt verbs of the one it replaces.
func checkOverride(lang, key string, typ reflect.Type, base, over json.RawMessage) error {
	where := "text." + lang + "." + key
	if typ == reflect.TypeFor[Plural]() {
		var b, o Plural
		dec := json.NewDecoder(bytes.NewReader(over))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			return fmt.Errorf("%s: want plural forms such as {\"one\": …, \"other\": …}: %v", where, err)
		}
		json.Unmarshal(base, &b)
		for _, f := range pluralForms {
			if s := o.form(f.form); s != "" {
				if err := sameVerbs(where+"."+f.name, b.Other, s); err != nil {
					return err
				}
			}
		}
		return nil
	}
	var b, o string
	if err := json.Unmarshal(over, &o); err != nil {
		return fmt.Errorf("%s: want a text: %v", where, err)
	}
	json.Unmarshal(base, &b)
	if strings.TrimSpace(o) == "" {
		return fmt.Errorf("%s: empty", where)
	}
	return sameVerbs(where, b, o)
}

var fmtVerb = regexp.MustCompile(`%[-+# 0-9.\[\]]*[a-zA-Z%]`)

// sameVerbs refuses a text whose fmt verbs differ from its base's, or that
// is too long.
func sameVerbs(where, base, s string) error {
	if len([]rune(s)) > maxBrandText {
		return fmt.Errorf("%s: over %d characters", where, maxBrandText)
	}
	if got, want := fmtVerb.FindAllString(s, -1), fmtVerb.FindAllString(base, -1); !slices.Equal(got, want) {
		return fmt.Errorf("%s: has the formats %q; the text it replaces has %q (keep them, in order)", where, got, want)
	}
	return nil
}
