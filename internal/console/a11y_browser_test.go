package console_test

// Accessibility in the browser (issue 21 §4): every screen of the console
// passes axe-core's WCAG 2.2 AA rules (testenv.Audit, with the script
// USHER_TEST_AXE names), and an operator signs in and changes a room's
// setting with the keyboard alone, seeing where the focus is.

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"usher/internal/queue"
	"usher/internal/testenv"
)

// TestAxeConsole audits the sign-in screen, the rooms screen, a room's
// screen with its settings form, the confirmation dialog and the schedules
// screen, in the light and the dark colour scheme.
func TestAxeConsole(t *testing.T) {
	t.Parallel()
	axe := testenv.Axe(t)
	ctx := newBrowser(t)
	e := newEnv(t, envOptions{booking: true})
	paused := queue.DefaultSettings()
	paused.State = queue.Paused
	e.room("concert-a", paused)
	e.room("concert-b", queue.DefaultSettings())
	e.enter("concert-a", "a", 3)
	url := e.srv.URL + "/console/"

	for _, scheme := range []string{"light", "dark"} {
		run(t, ctx, "colour scheme "+scheme, testenv.EmulateMedia("prefers-color-scheme", scheme))
		run(t, ctx, "open the console", chromedp.Navigate(url))
		testenv.Eventually(t, time.Minute, "the sign-in or the rooms", func() bool {
			return eval[bool](t, ctx, `!document.getElementById("signin-view").hidden || !document.getElementById("rooms-view").hidden`)
		})
		if eval[bool](t, ctx, `!document.getElementById("signin-view").hidden`) {
			testenv.Audit(t, ctx, axe, scheme+": sign-in")
			run(t, ctx, "sign in", chromedp.SendKeys(chromedp.ID("key"), adminKey), chromedp.Click(chromedp.ID("signin-button")))
		}
		run(t, ctx, "rooms", chromedp.WaitVisible(chromedp.ID("rooms-view")))
		waitText(t, ctx, `tr[data-room="concert-a"] td[data-k="waiting"]`, "3")
		testenv.Audit(t, ctx, axe, scheme+": rooms")

		run(t, ctx, "open concert-b", chromedp.Navigate(url+"#/room/concert-b"), chromedp.WaitVisible(chromedp.ID("room-view")))
		waitText(t, ctx, "#room-state", "open")
		run(t, ctx, "the form", chromedp.WaitVisible(chromedp.CSS(`#settings input[name="max_active"]`)))
		testenv.Audit(t, ctx, axe, scheme+": room")
		run(t, ctx, "click pause", chromedp.Click(chromedp.CSS(`.actions button[data-state="paused"]`)), chromedp.WaitVisible(chromedp.ID("confirm")))
		testenv.Audit(t, ctx, axe, scheme+": confirmation")
		run(t, ctx, "cancel", chromedp.Click(chromedp.ID("confirm-cancel")), chromedp.WaitNotVisible(chromedp.ID("confirm")))

		run(t, ctx, "open the schedules", chromedp.Navigate(url+"#/schedules"), chromedp.WaitVisible(chromedp.ID("schedules-view")))
		testenv.Audit(t, ctx, axe, scheme+": schedules")
	}
}

// press sends keys to the focused element, as a keyboard would.
func press(t *testing.T, ctx context.Context, keys string) {
	t.Helper()
	run(t, ctx, "press "+keys, chromedp.KeyEvent(keys))
}

// tabTo presses Tab until the focused element matches the CSS selector sel,
// failing after 100 presses; the element reached must show where the focus
// is (an outline).
func tabTo(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	for range 100 {
		if eval[bool](t, ctx, `document.activeElement && document.activeElement.matches(`+jsString(sel)+`)`) {
			outline := eval[string](t, ctx, `(() => { const s = getComputedStyle(document.activeElement); return s.outlineStyle + " " + s.outlineWidth })()`)
			if outline == "" || outline[:4] == "none" || outline[len(outline)-3:] == "0px" {
				t.Errorf("%s has the focus but no visible outline (%s)", sel, outline)
			}
			return
		}
		press(t, ctx, kb.Tab)
	}
	t.Fatalf("100 presses of Tab never reached %s", sel)
}

// TestKeyboardConsole: with key presses only, an operator signs in, opens
// a room, changes max_active, applies it in the confirmation dialog, and
// the store has the new value; Escape closes the dialog and gives the focus
// back.
func TestKeyboardConsole(t *testing.T) {
	t.Parallel()
	ctx := newBrowser(t)
	e := newEnv(t, envOptions{})
	open := queue.DefaultSettings()
	open.MaxActive = 50
	e.room("concert-a", open)
	e.room("concert-b", open)

	run(t, ctx, "open the console", testenv.EmulateFocus(), chromedp.Navigate(e.srv.URL+"/console/"), chromedp.WaitVisible(chromedp.ID("key")))
	tabTo(t, ctx, "#key")
	press(t, ctx, adminKey)
	press(t, ctx, kb.Enter)
	run(t, ctx, "signed in", chromedp.WaitVisible(chromedp.ID("rooms-view")))
	waitText(t, ctx, `tr[data-room="concert-b"] td[data-k="waiting"]`, "0")

	tabTo(t, ctx, `a[href="#/room/concert-b"]`)
	press(t, ctx, kb.Enter)
	run(t, ctx, "the room", chromedp.WaitVisible(chromedp.ID("room-view")), chromedp.WaitVisible(chromedp.CSS(`#settings input[name="max_active"]`)))
	waitText(t, ctx, "#room-name", "concert-b")

	// Escape cancels the dialog and the focus comes back to the button.
	tabTo(t, ctx, `.actions button[data-state="paused"]`)
	press(t, ctx, kb.Enter)
	run(t, ctx, "the dialog", chromedp.WaitVisible(chromedp.ID("confirm")))
	if !eval[bool](t, ctx, `document.getElementById("confirm").contains(document.activeElement)`) {
		t.Error("the dialog opened without the focus")
	}
	press(t, ctx, kb.Escape)
	run(t, ctx, "the dialog closes", chromedp.WaitNotVisible(chromedp.ID("confirm")))
	if !eval[bool](t, ctx, `document.activeElement.matches('.actions button[data-state="paused"]')`) {
		t.Error("the focus did not come back to the Pause button after Escape")
	}

	tabTo(t, ctx, `#settings input[name="max_active"]`)
	press(t, ctx, kb.End)
	for range 6 {
		press(t, ctx, kb.Backspace)
	}
	press(t, ctx, "80")
	tabTo(t, ctx, "#save")
	press(t, ctx, kb.Enter)
	run(t, ctx, "the dialog", chromedp.WaitVisible(chromedp.ID("confirm")))
	// The focus stays in the open dialog: Tab cycles through its buttons.
	for range 4 {
		press(t, ctx, kb.Tab)
		if !eval[bool](t, ctx, `document.getElementById("confirm").contains(document.activeElement)`) {
			t.Fatal("Tab left the open dialog")
		}
	}
	tabTo(t, ctx, "#confirm-ok")
	press(t, ctx, kb.Enter)
	testenv.Eventually(t, time.Minute, "max_active 80 in the store", func() bool {
		v, err := e.q.Room(context.Background(), "concert-b")
		return err == nil && v.Settings.MaxActive == 80
	})
	if v, _ := e.q.Room(context.Background(), "concert-a"); v.Settings.MaxActive != 50 {
		t.Errorf("concert-a's max_active = %d, want 50 (untouched)", v.Settings.MaxActive)
	}
}

// jsString quotes s as a JavaScript string.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
