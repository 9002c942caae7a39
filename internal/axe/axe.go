// Package axe runs axe-core's accessibility audit (WCAG 2.0–2.2, levels A
// and AA) on a page open in headless Chromium. It ships neither: it needs
// a chromium binary and axe.min.js of npm's axe-core package.
package axe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
)

// Tags are the rule sets an audit runs.
var Tags = []string{"wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"}

// Violation is one rule a page breaks, with the elements that break it.
type Violation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target  []any  `json:"target"`
		Summary string `json:"failureSummary"`
	} `json:"nodes"`
}

// String is the rule, its impact and help, then one line per element.
func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "axe %s (%s): %s", v.ID, v.Impact, v.Help)
	for _, n := range v.Nodes {
		fmt.Fprintf(&b, "\n\t%v: %s", n.Target, strings.ReplaceAll(n.Summary, "\n", " "))
	}
	return b.String()
}

// Audit injects script (axe.min.js) into the page of the chromedp tab ctx
// and runs it with Tags, within a minute.
func Audit(ctx context.Context, script string) ([]Violation, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute) // a guard against a hang
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](script+"\n;true")); err != nil {
		return nil, fmt.Errorf("inject axe-core: %w", err)
	}
	tags := `["` + strings.Join(Tags, `","`) + `"]`
	js := `axe.run(document, {runOnly: {type: "tag", values: ` + tags + `}, resultTypes: ["violations"]})
		.then(r => r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
			nodes: v.nodes.map(n => ({target: n.target, failureSummary: n.failureSummary}))})))`
	vs, err := chromedp.Run(ctx, chromedp.Evaluate[[]Violation](js, chromedp.EvalAwaitPromise))
	if err != nil {
		return nil, fmt.Errorf("run axe-core: %w", err)
	}
	return vs, nil
}

// Chromium finds the chromium binary: name when it is not "", else
// chromium on PATH.
func Chromium(name string) (string, error) {
	if name == "" {
		name = "chromium"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("chromium: %w (apt-get install chromium)", err)
	}
	return p, nil
}

// Script reads axe.min.js at path.
func Script(path string) (string, error) {
	if path == "" {
		return "", errors.New("axe-core: no axe.min.js given (npm install axe-core)")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("axe-core: %w", err)
	}
	return string(b), nil
}

// Browser starts headless Chromium at path with a fresh profile in dir
// and a phone's window, and returns its first tab; cancel ends it.
func Browser(ctx context.Context, path, dir string) (context.Context, context.CancelFunc, error) {
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(412, 860),
	}
	ctx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	ctx, cancelTab := chromedp.NewContext(ctx)
	cancel := func() { cancelTab(); cancelAlloc() }
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		return nil, nil, fmt.Errorf("start chromium: %w", err)
	}
	return ctx, cancel, nil
}
