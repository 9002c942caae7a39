package gateway

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTextSets: every shipped language has a text set and every set has
// exactly en.json's keys, each used by the page (waiting.html as .T.X),
// its script (waiting.js as t.x) or the server (a Text's field read in
// this package's Go), with the same fmt verbs in the same order in every
// text and plural form; each set loads (its plural forms are those CLDR
// gives its language).
func TestTextSets(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("page/text/*.json")
	if err != nil {
		t.Fatal(err)
	}
	var onDisk []string
	for _, f := range files {
		onDisk = append(onDisk, strings.TrimSuffix(filepath.Base(f), ".json"))
	}
	want := slices.Sorted(slices.Values(Languages))
	if diff := cmp.Diff(want, onDisk); diff != "" {
		t.Errorf("text sets on disk differ from Languages (-Languages +page/text):\n%s", diff)
	}

	// The keys a Text holds, by field name.
	keyOf := map[string]string{}
	tt := reflect.TypeFor[Text]()
	for i := range tt.NumField() {
		if f := tt.Field(i); f.IsExported() {
			keyOf[f.Name] = f.Tag.Get("json")
		}
	}
	en := rawText(t, "en")
	if diff := cmp.Diff(slices.Sorted(maps.Values(keyOf)), slices.Sorted(maps.Keys(en))); diff != "" {
		t.Errorf("en.json's keys differ from Text's (-Text +en.json):\n%s", diff)
	}

	used := textUses(t, keyOf)
	for _, k := range slices.Sorted(maps.Keys(en)) {
		if !used[k] {
			t.Errorf("key %s is in en.json but neither the page, its script nor the server uses it", k)
		}
	}

	for _, lang := range Languages {
		set := rawText(t, lang)
		if diff := cmp.Diff(slices.Sorted(maps.Keys(en)), slices.Sorted(maps.Keys(set))); diff != "" {
			t.Errorf("%s.json: keys differ from en.json (-en +%s):\n%s", lang, lang, diff)
		}
		for k, enForms := range en {
			wantVerbs := verbs(enForms["other"])
			for form, s := range set[k] {
				if got := verbs(s); !slices.Equal(got, wantVerbs) {
					t.Errorf("%s.json: %s (%s) has the verbs %q, want %q as in en.json", lang, k, form, got, wantVerbs)
				}
			}
		}
		if _, err := loadText(lang); err != nil {
			t.Errorf("%s: %v", lang, err)
		}
	}
}

// rawText reads a text set as key → plural form → text; a plain text is
// its form "other".
func rawText(t *testing.T, lang string) map[string]map[string]string {
	t.Helper()
	b, err := os.ReadFile("page/text/" + lang + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatalf("%s.json: %v", lang, err)
	}
	out := map[string]map[string]string{}
	for k, v := range raw {
		var s string
		if json.Unmarshal(v, &s) == nil {
			out[k] = map[string]string{"other": s}
			continue
		}
		var forms map[string]string
		if err := json.Unmarshal(v, &forms); err != nil {
			t.Fatalf("%s.json: %s is neither a text nor plural forms: %v", lang, k, err)
		}
		out[k] = forms
	}
	return out
}

var verbRE = regexp.MustCompile(`%[-+# 0-9.\[\]]*[a-zA-Z%]`)

// verbs lists the fmt verbs of s in order.
func verbs(s string) []string { return verbRE.FindAllString(s, -1) }

// textUses returns the keys used: .T.<Field> in the template, t.<key> in
// the script, and in the package's Go a Field read from x.T, from a
// variable or parameter declared as a Text, or from p.texts[…].
func textUses(t *testing.T, keyOf map[string]string) map[string]bool {
	t.Helper()
	used := map[string]bool{}
	html, err := os.ReadFile("page/waiting.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`\.T\.([A-Za-z]+)`).FindAllStringSubmatch(string(html), -1) {
		used[keyOf[m[1]]] = true
	}
	js, err := os.ReadFile("page/waiting.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`\bt\.([a-z_]+)`).FindAllStringSubmatch(string(js), -1) {
		used[m[1]] = true
	}
	fset := token.NewFileSet()
	goFiles, _ := filepath.Glob("*.go")
	for _, name := range goFiles {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		texts := map[string]bool{} // names declared as a Text
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Field:
				if id, ok := n.Type.(*ast.Ident); ok && id.Name == "Text" {
					for _, name := range n.Names {
						texts[name.Name] = true
					}
				}
			case *ast.AssignStmt: // t := p.textFor(r)
				if len(n.Lhs) == 1 && len(n.Rhs) == 1 {
					if call, ok := n.Rhs[0].(*ast.CallExpr); ok {
						sel, ok := call.Fun.(*ast.SelectorExpr)
						if id, isID := n.Lhs[0].(*ast.Ident); ok && isID && sel.Sel.Name == "textFor" {
							texts[id.Name] = true
						}
					}
				}
			}
			return true
		})
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			key, isText := keyOf[sel.Sel.Name]
			if !isText {
				return true
			}
			switch x := sel.X.(type) {
			case *ast.SelectorExpr:
				used[key] = used[key] || x.Sel.Name == "T"
			case *ast.Ident:
				used[key] = used[key] || texts[x.Name]
			case *ast.IndexExpr:
				if s, ok := x.X.(*ast.SelectorExpr); ok && s.Sel.Name == "texts" {
					used[key] = true
				}
			}
			return true
		})
	}
	return used
}
