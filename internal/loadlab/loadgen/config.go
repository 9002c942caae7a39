package loadgen

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrInvalid reports a bad configuration.
var ErrInvalid = errors.New("loadgen: invalid configuration")

// Scenarios.
const (
	// Direct users call the origin endpoint in a loop (seed 000 "no queue").
	Direct = "direct"
	// Queued users enter the waiting room, poll as told, and once admitted
	// call the origin endpoint (seed 000 "with queue", seed 002's end-to-end
	// test).
	Queued = "queued"
)

// Config is one scenario's run.
type Config struct {
	Scenario string
	// Target is the origin endpoint every scenario calls.
	Target Target
	// Usher is usher's base URL and Room the room (Queued only).
	Usher, Room string
	// AdminKey, if set, lets each tick read the room's admission rate in
	// force (admit_rate_current, Tick.AdmitRate).
	AdminKey string
	// Admin is usher's admin listener (its --admin-addr), where AdminKey's
	// reads go; default Usher.
	Admin string

	// Closed model: Users users, started SpawnRate per second (0: at once),
	// each running Iterations iterations (0: until Duration ends). An
	// iteration is one origin call (Direct) or one visit (Queued).
	Users      int
	SpawnRate  float64
	Iterations int
	// Duration bounds the closed model's run.
	Duration time.Duration

	// Open model, used when Stages is set: iterations start at a rate that
	// goes linearly from StartRate through each stage's target (k6's
	// ramping-arrival-rate), whether or not earlier ones finished; at most
	// MaxInFlight run at once, further arrivals are dropped and counted.
	// Latency is measured from each iteration's scheduled time.
	Stages      []Stage
	StartRate   float64
	MaxInFlight int

	// Calls is the origin calls an admitted visitor makes (Queued; 0: until
	// the run ends), Think the pause before each call but the first (and
	// between Direct calls).
	Calls int
	Think Think
	// Leave makes a visitor leave the room after its calls (DELETE), freeing
	// its slot at once instead of at the active TTL.
	Leave bool
	// GiveUp is the share of queued visitors (0 to 1) who, waiting at
	// entry, give up silently at a uniformly random moment within the ETA
	// they were told: they stop polling and never leave, as a closed tab
	// does (Queued).
	GiveUp float64
	// Buy, when set, is a schedule id: an admitted visitor buys one seat of
	// it through usher's booking API (seat map, hold, reservation; buy.go)
	// instead of calling Target, and the report counts those who bought and
	// those who found nothing to buy (Queued). Target defaults to the
	// schedule's seat map. BuyMode says how they choose a seat (BuyModes;
	// "": BuyRandom).
	Buy     int64
	BuyMode string
	// ForwardedFor gives each visit's entry an X-Forwarded-For address of its
	// own (in 198.18.0.0/16, the benchmarking range), so that a usher that
	// trusts this machine as a proxy (--trusted-proxies) counts every visitor
	// as its own client, as real visitors on their own networks are.
	ForwardedFor bool

	// Timeout bounds each HTTP call (default 60 s). Grace is how long calls
	// in flight when the run ends may finish (default 5 s); later they are
	// cancelled and counted as interrupted, not as requests.
	Timeout, Grace time.Duration
	// Tick is the timeline's resolution (default 1 s).
	Tick time.Duration
	// OriginStats is the origin's GET /stats URL (usher origin), read for
	// utilisation; "" skips it.
	OriginStats string
	// Expect lists non-2xx statuses of origin calls that count as successes
	// (seed 002 counts 404 and 409: the seat was missing or taken).
	Expect []int

	Client *http.Client
	// Progress receives a progress line per tick; TTY redraws it in place.
	Progress io.Writer
	TTY      bool
}

// Target is an HTTP endpoint.
type Target struct {
	URL    string
	Method string
	Body   []byte
	Header http.Header
}

// Stage is one segment of the open model's arrival rate.
type Stage struct {
	Duration time.Duration
	Target   float64 // iterations per second at the stage's end
}

// Think is a pause drawn uniformly from [Min, Max].
type Think struct{ Min, Max time.Duration }

// Sample draws a pause.
func (t Think) Sample() time.Duration {
	if t.Max <= t.Min {
		return t.Min
	}
	return t.Min + rand.N(t.Max-t.Min+1)
}

func (t Think) String() string {
	if t.Max <= t.Min {
		return t.Min.String()
	}
	return t.Min.String() + "-" + t.Max.String()
}

// ParseThink reads "500ms" or "500ms-1.5s".
func ParseThink(s string) (Think, error) {
	lo, hi, isRange := strings.Cut(s, "-")
	a, err := time.ParseDuration(lo)
	if err != nil || a < 0 {
		return Think{}, fmt.Errorf("%w: think time %q: want a duration or MIN-MAX", ErrInvalid, s)
	}
	if !isRange {
		return Think{a, a}, nil
	}
	b, err := time.ParseDuration(hi)
	if err != nil || b < a {
		return Think{}, fmt.Errorf("%w: think time %q: want MIN-MAX with MIN ≤ MAX", ErrInvalid, s)
	}
	return Think{a, b}, nil
}

// ParseStages reads "30s:100,1m:100,10s:0": ramp to 100/s over 30 s, hold
// a minute, ramp down to 0 over 10 s.
func ParseStages(s string) ([]Stage, error) {
	var stages []Stage
	for _, part := range strings.Split(s, ",") {
		d, r, ok := strings.Cut(strings.TrimSpace(part), ":")
		dur, err1 := time.ParseDuration(d)
		rate, err2 := strconv.ParseFloat(r, 64)
		if !ok || err1 != nil || err2 != nil || dur <= 0 || rate < 0 {
			return nil, fmt.Errorf("%w: stage %q: want DURATION:RATE, e.g. 30s:100", ErrInvalid, part)
		}
		stages = append(stages, Stage{dur, rate})
	}
	return stages, nil
}

// Open reports whether the config uses the open model.
func (c Config) Open() bool { return len(c.Stages) > 0 }

// length is how long the run lasts at most (before the grace period).
func (c Config) length() time.Duration {
	if !c.Open() {
		return c.Duration
	}
	var d time.Duration
	for _, s := range c.Stages {
		d += s.Duration
	}
	return d
}

func (c *Config) defaults() {
	if c.BuyMode == "" {
		c.BuyMode = BuyRandom
	}
	if c.Buy > 0 && c.Target.URL == "" {
		c.Target.URL = fmt.Sprintf("%s/api/v1/schedules/%d/seats", c.Usher, c.Buy)
	}
	if c.Target.Method == "" {
		c.Target.Method = http.MethodGet
	}
	if c.Timeout <= 0 {
		c.Timeout = 60 * time.Second
	}
	if c.Grace < 0 {
		c.Grace = 0
	} else if c.Grace == 0 {
		c.Grace = 5 * time.Second
	}
	if c.Tick <= 0 {
		c.Tick = time.Second
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 10_000
	}
	if c.Client == nil {
		c.Client = NewClient(max(c.Users, 64))
	}
}

func (c Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	if u, err := url.Parse(c.Target.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bad("target %q: want an http(s) URL", c.Target.URL)
	}
	switch c.Scenario {
	case Direct:
	case Queued:
		if u, err := url.Parse(c.Usher); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("usher %q: want usher's base URL, e.g. http://127.0.0.1:8080", c.Usher)
		}
		if c.Room == "" {
			return bad("queued scenario needs a room")
		}
	default:
		return bad("scenario %q: want %s or %s", c.Scenario, Direct, Queued)
	}
	switch {
	case c.Open() && c.Users > 0:
		return bad("give users (closed model) or stages (open model), not both")
	case !c.Open() && c.Users < 1:
		return bad("give users (closed model) or stages (open model)")
	case !c.Open() && c.Duration <= 0:
		return bad("closed model needs a duration")
	case c.SpawnRate < 0 || c.StartRate < 0 || c.Iterations < 0 || c.Calls < 0:
		return bad("spawn rate, start rate, iterations and calls cannot be negative")
	case c.Buy < 0 || (c.Buy > 0 && c.Scenario != Queued):
		return bad("buy %d: want a schedule id, with the queued scenario", c.Buy)
	case !slices.Contains(BuyModes, c.BuyMode):
		return bad("buy mode %q: want one of %v", c.BuyMode, BuyModes)
	case !(c.GiveUp >= 0 && c.GiveUp <= 1):
		return bad("give-up %v: want a share from 0 to 1", c.GiveUp)
	case c.Scenario == Queued && c.Calls == 0 && c.Iterations > 0:
		return bad("a visit with unlimited calls never ends: give calls with iterations")
	}
	return nil
}

// NewClient returns an HTTP client for up to conns connections per host,
// without compression or HTTP/2 (as load generators usually are).
func NewClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}}
}
