package testenv

import (
	"context"
	"os"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"usher/internal/axe"
)

// AxeVar names the environment variable that gives the accessibility
// audits the axe-core script: axe.min.js of npm's axe-core package, which
// .ci/run installs outside the repository.
const AxeVar = "USHER_TEST_AXE"

// AxeTags are the rule sets an audit runs: WCAG 2.0, 2.1 and 2.2 at levels
// A and AA.
var AxeTags = axe.Tags

// Axe returns the axe-core script named by USHER_TEST_AXE, skipping the
// test when the variable is unset (failing it under CI). A set variable
// that names no readable file fails the test.
func Axe(tb testing.TB) string {
	tb.Helper()
	path := os.Getenv(AxeVar)
	if path == "" {
		Skip(tb, AxeVar, "npm install --no-save --prefix /tmp/axe axe-core@4 and set "+AxeVar+
			"=/tmp/axe/node_modules/axe-core/axe.min.js")
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%s: %v", AxeVar, err)
	}
	return string(b)
}

// Audit injects script (the one Axe returned) into the page of ctx, runs
// it with AxeTags and fails the test with one line per violated rule (its
// id, impact and the nodes it found), naming the page's state as what.
func Audit(tb testing.TB, ctx context.Context, script, what string) {
	tb.Helper()
	vs, err := axe.Audit(ctx, script)
	if err != nil {
		tb.Fatalf("audit %s: %v", what, err)
	}
	for _, v := range vs {
		tb.Errorf("%s: %s", what, v)
	}
}

// EmulateMedia makes the tab match the CSS media feature name with value,
// e.g. prefers-reduced-motion: reduce, or prefers-color-scheme: dark.
func EmulateMedia(name, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: name, Value: value}},
		})
		return err
	})
}

// DisableScripts turns JavaScript off in the tab, from its next navigation.
func DisableScripts() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		return err
	})
}

// EmulateFocus makes the tab behave as the focused window, as a visible
// browser's would: a headless tab otherwise may not match :focus.
func EmulateFocus() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetFocusEmulationEnabled, emulation.SetFocusEmulationEnabledParams{Enabled: true})
		return err
	})
}
