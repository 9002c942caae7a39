package gateway

// The operator's page directory (Config.PageDir): the site's own look
// without a rebuild. Every file in it is optional:
//
//   - brand.json: the site's name, a logo, colours and per-language wording
//     overrides of the shipped text keys (Brand);
//   - waiting.html: a template that replaces the shipped waiting page
//     (fields: Page);
//   - text/<lang>.json: a whole text set replacing a shipped language's;
//   - rooms/<room>/: the same files for one room, each replacing the
//     directory's for that room's page and JSON texts.
//
// The directory is read through an os.Root, so no name in it (the logo's)
// leads out of it, not even by a symbolic link. A set is checked whole
// before use: brand values by their rules, text sets as the shipped ones
// are, the template by rendering every state in every language. A broken
// directory at start fails the start; a broken one later keeps the last
// good set, logs why and counts it (usher_page_reloads_total, result
// error; usher_page_dir_ok 0). Brand values are text: the templates
// escape them. Templates are the operator's own code and trusted.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/pow"
	"usher/internal/queue"
)

// The page directory's files.
const (
	BrandFile    = "brand.json"
	TemplateFile = "waiting.html"
	TextDir      = "text"
	// RoomsDir holds a directory per room (rooms/<room>/) whose files
	// replace the page directory's own for that room's page.
	RoomsDir = "rooms"
)

// PagePoll is how often a page directory is looked at for a change.
const PagePoll = 2 * time.Second

// pageSet is what the waiting page is rendered from.
type pageSet struct {
	waiting *template.Template
	texts   map[string]Text // by language, every shipped one
	css     template.CSS
	brand   brandView
	rooms   map[string]*pageSet // a room's own set, by room
}

// forRoom is room's set: its own, or the directory's.
func (s *pageSet) forRoom(room string) *pageSet {
	if r, ok := s.rooms[room]; ok {
		return r
	}
	return s
}

// pageFiles are a page directory's files, by name: the brand, the
// template, text/<lang>.json and the logo that the brand names.
type pageFiles map[string][]byte

// digest identifies the files' names and contents.
func (f pageFiles) digest() [32]byte {
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(f)) {
		fmt.Fprintf(h, "%d:%s%d:", len(name), name, len(f[name]))
		h.Write(f[name])
	}
	return [32]byte(h.Sum(nil))
}

// maxPageFile bounds each file read from a page directory.
const maxPageFile = 256 << 10

// readPageDir reads dir's files (none when dir is ""), and the operator's
// template at tmplPath as waiting.html when it is not "".
func readPageDir(dir, tmplPath string) (pageFiles, error) {
	files := pageFiles{}
	if tmplPath != "" {
		b, err := os.ReadFile(tmplPath)
		if err != nil {
			return nil, fmt.Errorf("waiting template: %w", err)
		}
		files[TemplateFile] = b
	}
	if dir == "" {
		return files, nil
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("page directory: %w", err)
	}
	defer root.Close()
	r := dirReader{root: root, dir: dir, files: files, tmplPath: tmplPath}
	if err := r.readSet(""); err != nil {
		return nil, err
	}
	rooms, err := r.names(RoomsDir)
	if err != nil {
		return nil, err
	}
	for _, room := range rooms {
		if fi, err := root.Stat(RoomsDir + "/" + room); err != nil || !fi.IsDir() || !queue.ValidRoomID(room) {
			return nil, fmt.Errorf("page directory %s: %s/%s: want a directory named for a room, [a-z0-9][a-z0-9-]{0,63}", dir, RoomsDir, room)
		}
		if err := r.readSet(RoomsDir + "/" + room + "/"); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// dirReader reads a page directory's files through its root.
type dirReader struct {
	root     *os.Root
	dir      string
	files    pageFiles
	tmplPath string
}

// read reads name into files; a missing file is no error.
func (r dirReader) read(name string) error {
	f, err := r.root.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("page directory %s: %w", r.dir, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPageFile+1))
	if err != nil {
		return fmt.Errorf("page directory %s: %w", r.dir, err)
	}
	if len(b) > maxPageFile {
		return fmt.Errorf("page directory %s: %s is over %d KiB", r.dir, name, maxPageFile>>10)
	}
	r.files[name] = b
	return nil
}

// names lists the directory sub (none when it does not exist).
func (r dirReader) names(sub string) ([]string, error) {
	d, err := r.root.Open(sub)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("page directory %s: %w", r.dir, err)
	}
	defer d.Close()
	names, err := d.Readdirnames(200)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("page directory %s: %w", r.dir, err)
	}
	slices.Sort(names)
	return names, nil
}

// readSet reads one set's files under prefix ("" or rooms/<room>/): the
// brand, the template, the text sets and the logo the brand names,
// relative to the brand.
func (r dirReader) readSet(prefix string) error {
	if err := r.read(prefix + BrandFile); err != nil {
		return err
	}
	if r.tmplPath == "" {
		if err := r.read(prefix + TemplateFile); err != nil {
			return err
		}
	} else if _, err := r.root.Stat(prefix + TemplateFile); err == nil {
		return fmt.Errorf("page directory %s has %s%s and a waiting template is given too: use one", r.dir, prefix, TemplateFile)
	}
	names, err := r.names(prefix + TextDir)
	if err != nil {
		return err
	}
	for _, name := range names {
		lang, ok := strings.CutSuffix(name, ".json")
		if !ok || !slices.Contains(Languages, lang) {
			return fmt.Errorf("page directory %s: %s%s/%s: want <lang>.json for a shipped language, one of %s",
				r.dir, prefix, TextDir, name, strings.Join(Languages, ", "))
		}
		if err := r.read(prefix + TextDir + "/" + name); err != nil {
			return err
		}
	}
	if b, ok := r.files[prefix+BrandFile]; ok {
		var logo struct {
			Logo string `json:"logo"`
		}
		json.Unmarshal(b, &logo) // a broken brand is reported when built
		if logoIsFile(logo.Logo) {
			if err := checkLogoName(logo.Logo); err != nil {
				return fmt.Errorf("page directory %s: %s%s: %w", r.dir, prefix, BrandFile, err)
			}
			if _, err := r.root.Stat(prefix + logo.Logo); err != nil {
				return fmt.Errorf("page directory %s: %s%s: logo %q: %w", r.dir, prefix, BrandFile, logo.Logo, err)
			}
			if err := r.read(prefix + logo.Logo); err != nil {
				return err
			}
		}
	}
	return nil
}

// split splits files into the directory's own and each room's,
// a room's being the directory's with its own files in their place.
func (f pageFiles) split() (own pageFiles, rooms map[string]pageFiles) {
	own, rooms = pageFiles{}, map[string]pageFiles{}
	for name, b := range f {
		rest, ok := strings.CutPrefix(name, RoomsDir+"/")
		if !ok {
			own[name] = b
			continue
		}
		room, file, _ := strings.Cut(rest, "/")
		if rooms[room] == nil {
			rooms[room] = pageFiles{}
		}
		rooms[room][file] = b
	}
	for room, mine := range rooms {
		merged := maps.Clone(own)
		maps.Copy(merged, mine)
		rooms[room] = merged
	}
	return own, rooms
}

// buildPageSet checks files and makes the page set they give over the
// shipped one, with each room's.
func buildPageSet(files pageFiles) (*pageSet, error) {
	own, rooms := files.split()
	s, err := buildOne(own)
	if err != nil {
		return nil, err
	}
	for _, room := range slices.Sorted(maps.Keys(rooms)) {
		rs, err := buildOne(rooms[room])
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", RoomsDir, room, err)
		}
		if s.rooms == nil {
			s.rooms = map[string]*pageSet{}
		}
		s.rooms[room] = rs
	}
	return s, nil
}

// buildOne is buildPageSet for one set of files, a room's or the
// directory's own.
func buildOne(files pageFiles) (*pageSet, error) {
	s := &pageSet{texts: make(map[string]Text, len(Languages)), css: waitingCSS}
	for _, l := range Languages {
		b, ok := files[TextDir+"/"+l+".json"]
		var err error
		if ok {
			s.texts[l], err = parseText(l, b)
			err = fileErr(TextDir+"/"+l+".json", err)
		} else {
			s.texts[l], err = loadText(l)
		}
		if err != nil {
			return nil, err
		}
	}
	if b, ok := files[BrandFile]; ok {
		b, err := parseBrand(b, files)
		if err != nil {
			return nil, fileErr(BrandFile, err)
		}
		if s.texts, err = b.apply(s.texts); err != nil {
			return nil, fileErr(BrandFile, err)
		}
		s.brand, s.css = b.view, s.css+b.css
	}
	var err error
	if b, ok := files[TemplateFile]; ok {
		s.waiting, err = template.New("waiting").Parse(string(b))
		if err != nil {
			return nil, fileErr(TemplateFile, err)
		}
	} else if s.waiting, err = template.ParseFS(pages, "page/waiting.html"); err != nil {
		return nil, err
	}
	// Every state in every language: a template that fails on one
	// (a field that is not there) is refused before any visitor sees it.
	for _, l := range Languages {
		for _, state := range PageStates {
			if err := s.waiting.Execute(io.Discard, s.sample(l, state)); err != nil {
				return nil, fileErr(TemplateFile, fmt.Errorf("%s page in %s: %w", state, l, err))
			}
		}
	}
	return s, nil
}

func fileErr(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", name, err)
}

// PageStates are the waiting page's states.
var PageStates = []string{StateWaiting, StatePaused, StatePreQueue, StateDraw, StateChallenge, StateFull, StateClosed, StateSoldOut, StateError}

// fill completes pg for language lang with the set's texts, style, brand
// and script, and the script's starting state.
func (s *pageSet) fill(pg *Page, lang string) {
	pg.T = s.texts[lang]
	pg.CSS, pg.Script = s.css, waitingJS
	pg.SiteName, pg.Logo, pg.LogoAlt = s.brand.siteName, s.brand.logo, s.brand.logoAlt
	pg.Client = clientState{
		State: pg.State, Position: pg.Position, StartPosition: pg.StartPosition,
		PollAfterMS: pg.PollAfterMS, ETASeconds: pg.ETASeconds, URL: pg.URL, Text: pg.T,
	}
	if pg.State == StateChallenge {
		pg.Client.Challenge, pg.Client.Worker = &pg.Challenge, WorkerPath
	}
}

// sample is the page of a visitor at position 3 of 7 in state, in lang:
// what checks and audits render.
func (s *pageSet) sample(lang, state string) Page {
	t := s.texts[lang]
	pg := Page{
		State: state, Room: "sale", Position: 3, Ahead: 2, StartPosition: 7, Progress: progress(7, 3),
		ETA: etaRange(t, 240), ETASeconds: 240, UpdatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Refresh: 2, PollAfterMS: 3_600_000, URL: "/", // no poll while a check looks
		Challenge: pow.Challenge{Bits: 30}, OpensAt: time.Date(2026, 1, 2, 4, 0, 0, 0, time.UTC),
	}
	if state == StatePreQueue || state == StateDraw {
		pg.Position, pg.Ahead, pg.ETASeconds = 0, 0, 3300
	}
	for _, l := range Languages {
		pg.Languages = append(pg.Languages, LangChoice{Lang: l, Name: s.texts[l].Name, URL: LangPath + "?lang=" + l + "&to=%2F", Current: l == lang})
	}
	s.fill(&pg, lang)
	return pg
}

// Pages is the waiting page's set: the shipped one, or an operator's page
// directory over it, reloaded on a change (Run).
type Pages struct {
	dir, tmpl string
	log       *slog.Logger
	set       atomic.Pointer[pageSet]
	mu        sync.Mutex // one reload at a time
	seen      [32]byte   // the files last tried
	lastErr   error
	reloads   *prometheus.CounterVec
	ok        prometheus.Gauge
}

// LoadPages reads and checks the page directory dir ("" for none) and
// the operator's template tmpl ("" for none); reg and log may be nil.
func LoadPages(dir, tmpl string, reg prometheus.Registerer, log *slog.Logger) (*Pages, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Pages{dir: dir, tmpl: tmpl, log: log,
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usher_page_reloads_total",
			Help: "Reloads of the page directory after a change, by result (ok, or error: the last good pages stay).",
		}, []string{"result"}),
		ok: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "usher_page_dir_ok",
			Help: "1 when the page directory's files in use are its current ones, 0 when its last change was refused.",
		}),
	}
	files, err := readPageDir(dir, tmpl)
	if err != nil {
		return nil, err
	}
	set, err := buildPageSet(files)
	if err != nil {
		return nil, fmt.Errorf("page directory %s: %w", dir, err)
	}
	p.set.Store(set)
	p.seen = files.digest()
	p.ok.Set(1)
	if reg != nil && (dir != "" || tmpl != "") {
		reg.MustRegister(p.reloads, p.ok)
	}
	return p, nil
}

// Pages is the edge's waiting page set; its Run reloads the page
// directory.
func (p *core) Pages() *Pages { return p.pages }

// current is the set in use.
func (p *Pages) current() *pageSet { return p.set.Load() }

// Reload reads the directory again and, when its files changed, checks
// them and puts them in use. A broken set keeps the last good one in use
// and is returned (also by Err, until a good one replaces it).
func (p *Pages) Reload() error {
	if p.dir == "" && p.tmpl == "" {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	files, err := readPageDir(p.dir, p.tmpl)
	d := sha256.Sum256([]byte(fmt.Sprint(err))) // an unreadable directory: told once per reason
	if err == nil {
		d = files.digest()
	}
	if d == p.seen {
		return p.lastErr
	}
	p.seen = d
	if err == nil {
		var set *pageSet
		if set, err = buildPageSet(files); err == nil {
			p.set.Store(set)
		}
	}
	p.lastErr = err
	if err != nil {
		p.reloads.WithLabelValues("error").Inc()
		p.ok.Set(0)
		p.log.Error("page directory refused; the last good pages stay", "dir", p.dir, "err", err)
		return err
	}
	p.reloads.WithLabelValues("ok").Inc()
	p.ok.Set(1)
	p.log.Info("page directory reloaded", "dir", p.dir)
	return nil
}

// Err is why the directory's last change was refused, or nil.
func (p *Pages) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}

// Run reloads the directory every PagePoll until ctx ends; without a
// directory or template it returns at once.
func (p *Pages) Run(ctx context.Context) error {
	if p.dir == "" && p.tmpl == "" {
		return nil
	}
	tick := time.NewTicker(PagePoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			p.Reload()
		}
	}
}

// Rooms lists the rooms with a page set of their own (rooms/<room>/).
func (p *Pages) Rooms() []string { return slices.Sorted(maps.Keys(p.current().rooms)) }

// Render writes the sample page of state in lang in room (the audit's
// pages): the room's own set, else the directory's.
func (p *Pages) Render(w io.Writer, room, lang, state string) error {
	s := p.current().forRoom(room)
	if _, ok := s.texts[lang]; !ok {
		return fmt.Errorf("language %q: want one of %s", lang, strings.Join(Languages, ", "))
	}
	if !slices.Contains(PageStates, state) {
		return fmt.Errorf("state %q: want one of %s", state, strings.Join(PageStates, ", "))
	}
	var buf bytes.Buffer
	if err := s.waiting.Execute(&buf, s.sample(lang, state)); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}
