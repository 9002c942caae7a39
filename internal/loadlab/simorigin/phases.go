package simorigin

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A Phase is a stretch of the run with its own settings: an origin whose
// capacity changes while it is measured. Zero fields keep the previous
// phase's value (the first phase's, the origin's Config).
type Phase struct {
	Duration time.Duration
	Workers  int
	Conns    int
	Service  Dist
	// Timeout < 0 sets no timeout; 0 keeps the previous one.
	Timeout time.Duration
}

func (p Phase) String() string {
	parts := []string{p.Duration.String()}
	if p.Workers > 0 {
		parts = append(parts, "workers="+strconv.Itoa(p.Workers))
	}
	if p.Conns > 0 {
		parts = append(parts, "conns="+strconv.Itoa(p.Conns))
	}
	if p.Service != nil {
		parts = append(parts, "service="+p.Service.String())
	}
	if p.Timeout != 0 {
		parts = append(parts, "timeout="+max(0, p.Timeout).String())
	}
	return strings.Join(parts, ":")
}

// ParsePhases reads phases such as
// "30s:conns=10,30s:conns=5:service=lognormal:80ms:0.25,30s:conns=10":
// phases separated by commas, each a duration and settings (workers,
// conns, service, timeout) separated by colons. A part without "=" belongs
// to the previous setting's value (the colons of a service distribution).
func ParsePhases(spec string) ([]Phase, error) {
	if spec == "" {
		return nil, nil
	}
	var out []Phase
	for i, text := range strings.Split(spec, ",") {
		parts := strings.Split(text, ":")
		d, err := time.ParseDuration(parts[0])
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("phase %d %q: want a duration first, such as 30s:conns=5", i+1, text)
		}
		ph := Phase{Duration: d}
		var settings []string
		for _, part := range parts[1:] {
			if !strings.Contains(part, "=") && len(settings) > 0 {
				settings[len(settings)-1] += ":" + part
				continue
			}
			settings = append(settings, part)
		}
		for _, kv := range settings {
			k, v, _ := strings.Cut(kv, "=")
			var err error
			switch k {
			case "workers", "conns":
				n, perr := strconv.Atoi(v)
				if perr != nil || n <= 0 {
					err = fmt.Errorf("want a number more than 0")
				} else if k == "workers" {
					ph.Workers = n
				} else {
					ph.Conns = n
				}
			case "service":
				ph.Service, err = ParseDist(v)
			case "timeout":
				var t time.Duration
				t, err = time.ParseDuration(v)
				if err == nil && t < 0 {
					err = fmt.Errorf("want 0 or more")
				}
				ph.Timeout = t
				if t == 0 {
					ph.Timeout = -1
				}
			default:
				err = fmt.Errorf("unknown setting (want workers, conns, service or timeout)")
			}
			if err != nil {
				return nil, fmt.Errorf("phase %d %q: %s: %v", i+1, text, k, err)
			}
		}
		out = append(out, ph)
	}
	return out, nil
}

// phaseClock follows the phases: which one runs, and the connection pool's
// capacity summed over time (connection-seconds), for utilisation.
type phaseClock struct {
	once    sync.Once
	mu      sync.Mutex
	current int // 1-based; 0 before the first request or without phases
	conns   int
	workers int
	capAt   time.Time
	capSecs float64 // conns × seconds until capAt
}

func (c *phaseClock) init(now time.Time, workers, conns int) {
	c.capAt, c.conns, c.workers = now, conns, workers
}

// capacity returns the connection-seconds offered until now and the pool
// sizes in force.
func (c *phaseClock) capacity(now time.Time) (secs float64, phase, workers, conns int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.capSecs + float64(c.conns)*now.Sub(c.capAt).Seconds(), c.current, c.workers, c.conns
}

// startPhases applies the first phase and schedules the next ones.
func (o *Origin) startPhases() {
	at := time.Duration(0)
	for i, ph := range o.cfg.Phases {
		if i == 0 {
			o.applyPhase(1, ph)
		} else {
			n := i + 1
			time.AfterFunc(at, func() { o.applyPhase(n, ph) })
		}
		at += ph.Duration
	}
}

// applyPhase switches to phase n.
func (o *Origin) applyPhase(n int, ph Phase) {
	now := time.Now()
	c := &o.phases
	c.mu.Lock()
	c.capSecs += float64(c.conns) * now.Sub(c.capAt).Seconds()
	c.capAt, c.current = now, n
	if ph.Conns > 0 {
		c.conns = ph.Conns
		o.conns.resize(ph.Conns)
	}
	if ph.Workers > 0 {
		c.workers = ph.Workers
		o.workers.resize(ph.Workers)
	}
	c.mu.Unlock()
	if ph.Service != nil {
		o.service.Store(&ph.Service)
	}
	if ph.Timeout != 0 {
		o.timeout.Store(int64(max(0, ph.Timeout)))
	}
	o.cfg.Logger.Info("phase", "phase", n, "settings", ph.String())
}
