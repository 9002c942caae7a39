package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/text/language"

	"usher/internal/pow"
	"usher/internal/wire"
)

// The waiting page's states: the visitor states of the JSON protocol,
// paused (waiting in a paused room), error (the store failed, or a proof of
// work was refused), challenge (a newcomer to a room with pow_bits: the
// page solves the challenge before it has a place), pre_queue (in before
// the room's opening draw: a countdown), draw (waiting for the draw of a
// random room's window: a countdown) and full (refused: the line is at
// the room's max_waiting).
const (
	StateWaiting   = wire.StateWaiting
	StatePaused    = wire.RoomPaused
	StateClosed    = wire.StateClosed
	StateSoldOut   = wire.StateSoldOut
	StateError     = "error"
	StateChallenge = "challenge"
	StatePreQueue  = wire.RoomPreQueue
	StateDraw      = wire.RoomDraw
	StateFull      = "full"
)

// Languages lists the shipped text sets, by BCP 47 tag.
var Languages = []string{"en", "ko", "ja", "zh-Hans", "zh-Hant", "es", "fr", "de", "pt", "vi", "th", "id"}

// Text is one language's texts of the waiting page (page/text/<lang>.json).
// Fields with %d or %s are fmt formats. A Plural's `plural` tag is the
// least count it shows: the set gives the forms its language uses from
// there on (eta_range is picked by its upper bound, which CLDR's plural
// ranges give for every shipped language).
type Text struct {
	Lang         string `json:"lang"`
	Dir          string `json:"dir"`      // ltr or rtl
	Name         string `json:"name"`     // the language's own name for itself
	Language     string `json:"language"` // the language links' label
	Title        string `json:"title"`
	Position     string `json:"position"`
	Ahead        Plural `json:"ahead" plural:"0"`
	ETA          string `json:"eta"`
	ETALess      string `json:"eta_less"`
	ETAAbout     Plural `json:"eta_about" plural:"1"`
	ETARange     Plural `json:"eta_range" plural:"2"` // low, high
	Progress     string `json:"progress"`
	Updated      string `json:"updated"`
	Keep         string `json:"keep"`
	PausedTitle  string `json:"paused_title"`
	Paused       string `json:"paused"`
	ClosedTitle  string `json:"closed_title"`
	SoldOutTitle string `json:"sold_out_title"`
	SoldOut      string `json:"sold_out"`
	Closed       string `json:"closed"`
	ErrorTitle   string `json:"error_title"`
	Error        string `json:"error"`
	Retry        string `json:"retry"`
	// The challenge state's texts.
	ChallengeTitle    string `json:"challenge_title"`
	Challenge         string `json:"challenge"`
	ChallengeLabel    string `json:"challenge_label"`
	ChallengeCount    string `json:"challenge_count"` // tries so far, tries expected
	ChallengeFailed   string `json:"challenge_failed"`
	ChallengeNoScript string `json:"challenge_noscript"`
	// The pre-queue state's texts (before a room's opening draw).
	PreQueueTitle string `json:"pre_queue_title"`
	OpensIn       string `json:"opens_in"`
	PreQueue      string `json:"pre_queue"` // %s: the opening, "2006-01-02 15:04 UTC"
	// The draw state's texts (a random room's window, until its draw).
	DrawTitle string `json:"draw_title"`
	DrawIn    string `json:"draw_in"`
	Draw      string `json:"draw"` // %s: the draw, "2006-01-02 15:04 UTC"
	// The full state's texts (the line is at the room's max_waiting).
	FullTitle string `json:"full_title"`
	Full      string `json:"full"`
	// Refresh is the link that shows the place again, for a browser
	// without JavaScript.
	Refresh string `json:"refresh"`
	// Slower says why the estimated wait grew (the line slowed down).
	Slower string `json:"slower"`
	// The turn state's texts (admitted while the tab is hidden), and the
	// visitor's opt-ins for being told: a sound, a browser notification.
	TurnTitle string `json:"turn_title"`
	TurnLeft  string `json:"turn_left"` // %s: the time left, "0:28"
	Continue  string `json:"continue"`
	Sound     string `json:"sound"`
	Notify    string `json:"notify"`
	NotifyOn  string `json:"notify_on"`

	tag language.Tag // Lang, for the plural rules
}

// loadText reads the shipped text set of lang ("" is en).
func loadText(lang string) (Text, error) {
	if lang == "" {
		lang = "en"
	}
	if !slices.Contains(Languages, lang) {
		return Text{}, fmt.Errorf("language %q: want one of %s", lang, strings.Join(Languages, ", "))
	}
	b, err := pages.ReadFile("page/text/" + lang + ".json")
	if err != nil {
		return Text{}, err
	}
	return parseText(lang, b)
}

// parseText parses and checks the text set of lang.
func parseText(lang string, b []byte) (Text, error) {
	var t Text
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return Text{}, fmt.Errorf("text set %s: %w", lang, err)
	}
	if t.Lang != lang {
		return Text{}, fmt.Errorf("text set %s: lang is %q", lang, t.Lang)
	}
	if t.Dir != "ltr" && t.Dir != "rtl" {
		return Text{}, fmt.Errorf("text set %s: dir %q, want ltr or rtl", lang, t.Dir)
	}
	t.tag = language.Make(lang)
	// Every text is needed, and each count in the forms its language
	// uses, no more: a missing translation fails at start.
	v := reflect.ValueOf(t)
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		key := f.Tag.Get("json")
		switch x := v.Field(i).Interface().(type) {
		case string:
			if x == "" {
				return Text{}, fmt.Errorf("text set %s: %s is missing", lang, key)
			}
		case Plural:
			least, _ := strconv.ParseInt(f.Tag.Get("plural"), 10, 64)
			if got, want := x.formsGiven(), formsUsed(t.tag, least); !slices.Equal(got, want) {
				return Text{}, fmt.Errorf("text set %s: %s gives the plural forms %v; %s uses %v", lang, key, got, lang, want)
			}
		}
	}
	return t, nil
}

// Page is what the waiting page template renders; docs/proxy.md lists the
// fields for operators' templates.
type Page struct {
	T Text // the texts of the chosen language
	// Languages are the language links (LangPath), none when the
	// proxy's language is forced.
	Languages []LangChoice
	State     string // waiting, paused, closed, sold_out, error or challenge
	Room      string
	// Position is 1 at the head of the queue; Ahead = Position-1.
	Position, Ahead int64
	// StartPosition is the position when the visitor entered; Progress is
	// how far the visitor has come from it, 0–100.
	StartPosition int64
	Progress      int
	ETA           string // the wait's range in the page's language, "about 4–6 min"
	ETASeconds    int64
	UpdatedAt     time.Time
	Refresh       int    // seconds until a retry is worth it (Retry-After)
	PollAfterMS   int64  // the server's poll delay
	URL           string // the URL first asked for: path and query
	CSS           template.CSS
	Script        template.JS
	// The operator's brand (brand.json): the site's name, and its logo
	// (an https URL, a site path or an inlined file) with its text.
	SiteName, LogoAlt string
	Logo              template.URL
	// Challenge is the proof of work to solve in the challenge state.
	Challenge pow.Challenge
	// OpensAt is the room's opening, in the pre-queue state.
	OpensAt time.Time
	// Client is the state the script starts from, as JSON in a
	// <script type="application/json" id="usher-state">.
	Client clientState
}

// clientState is what waiting.js reads.
type clientState struct {
	State         string `json:"state"`
	Position      int64  `json:"position"`
	StartPosition int64  `json:"start_position"`
	PollAfterMS   int64  `json:"poll_after_ms"`
	ETASeconds    int64  `json:"eta_seconds"`
	URL           string `json:"url"`
	Text          Text   `json:"text"`
	// In the challenge state: what to solve, and the worker that solves it.
	Challenge *pow.Challenge `json:"challenge,omitempty"`
	Worker    string         `json:"worker,omitempty"`
}

// AheadText is "3 people ahead of you" in the page's language.
func (p Page) AheadText() string { return aheadText(p.T, p.Ahead) }

// aheadText is the count of people ahead, in t's language and plural form.
func aheadText(t Text, ahead int64) string { return t.count(t.Ahead, ahead) }

// ChallengeText is "0 of about 65536 tries" in the page's language: the
// challenge state's count before the script starts.
func (p Page) ChallengeText() string {
	return fmt.Sprintf(p.T.ChallengeCount, 0, int64(1)<<p.Challenge.Bits)
}

// Countdown is the time left until the opening, ETASeconds, as "1:02:03"
// or "2:03" (waiting.js counts the same way).
func (p Page) Countdown() string {
	s := max(0, p.ETASeconds)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

// PreQueueText is the pre-queue's (or the draw's) explanation with the
// opening's (or the draw's) time.
func (p Page) PreQueueText() string {
	f := p.T.PreQueue
	if p.State == StateDraw {
		f = p.T.Draw
	}
	return fmt.Sprintf(f, p.OpensAt.UTC().Format("2006-01-02 15:04 UTC"))
}

// UpdatedText is UpdatedAt as "15:04:05 UTC".
func (p Page) UpdatedText() string { return p.UpdatedAt.UTC().Format("15:04:05 UTC") }

// progress is how far position has come from start, in percent.
func progress(start, position int64) int {
	if start <= 1 || position >= start {
		return 0
	}
	if position < 1 {
		position = 1
	}
	return int((start - position) * 100 / (start - 1))
}

// entryETA is the waiting page's wait for e: its range (eta_range_seconds)
// in whole minutes, low rounded down and high up, or etaRange without one.
// waiting.js's eta does the same.
func entryETA(t Text, e wire.Entry) string {
	r := e.ETARangeSeconds
	if r == [2]int64{} {
		return etaRange(t, e.ETASeconds)
	}
	if r[1] < 60 {
		return t.ETALess
	}
	lo, hi := max(1, r[0]/60), (r[1]+59)/60
	if hi <= lo {
		return t.count(t.ETAAbout, lo)
	}
	return t.count(t.ETARange, hi, lo, hi)
}

// etaRange shows an ETA as a range: ±20 % rounded to whole minutes.
func etaRange(t Text, secs int64) string {
	if secs < 60 {
		return t.ETALess
	}
	lo := int64(math.Floor(float64(secs) * 0.8 / 60))
	hi := int64(math.Ceil(float64(secs) * 1.2 / 60))
	if lo < 1 {
		lo = 1
	}
	if hi <= lo {
		return t.count(t.ETAAbout, lo)
	}
	return t.count(t.ETARange, hi, lo, hi)
}
