package simorigin

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Dist is a service-time distribution. Sample is safe for concurrent use.
type Dist interface {
	Sample() time.Duration
	// Quantile is the distribution's own q-quantile (q in (0, 1)).
	Quantile(q float64) time.Duration
	Mean() time.Duration
	// String is the form ParseDist reads.
	String() string
}

// ParseDist reads a distribution:
//
//	constant:50ms
//	lognormal:50ms:0.25   median 50 ms, σ 0.25 (p95 ≈ 75 ms, mean ≈ 52 ms)
//	exponential:50ms      mean 50 ms
//	uniform:40ms:60ms
func ParseDist(s string) (Dist, error) {
	parts := strings.Split(s, ":")
	bad := func(why string) (Dist, error) {
		return nil, fmt.Errorf("service-time distribution %q: %s (want constant:D, lognormal:MEDIAN:SIGMA, exponential:MEAN or uniform:MIN:MAX)", s, why)
	}
	dur := func(i int) (time.Duration, bool) {
		d, err := time.ParseDuration(parts[i])
		return d, err == nil && d >= 0
	}
	switch {
	case parts[0] == "constant" && len(parts) == 2:
		if d, ok := dur(1); ok {
			return Constant(d), nil
		}
	case parts[0] == "lognormal" && len(parts) == 3:
		median, ok := dur(1)
		sigma, err := strconv.ParseFloat(parts[2], 64)
		if ok && median > 0 && err == nil && sigma >= 0 && sigma <= 3 {
			return Lognormal{Median: median, Sigma: sigma}, nil
		}
	case parts[0] == "exponential" && len(parts) == 2:
		if d, ok := dur(1); ok && d > 0 {
			return Exponential(d), nil
		}
	case parts[0] == "uniform" && len(parts) == 3:
		lo, ok1 := dur(1)
		hi, ok2 := dur(2)
		if ok1 && ok2 && lo <= hi {
			return Uniform{Min: lo, Max: hi}, nil
		}
	default:
		return bad("unknown form")
	}
	return bad("bad parameters")
}

// Constant always takes the same time.
type Constant time.Duration

func (c Constant) Sample() time.Duration          { return time.Duration(c) }
func (c Constant) Quantile(float64) time.Duration { return time.Duration(c) }
func (c Constant) Mean() time.Duration            { return time.Duration(c) }
func (c Constant) String() string                 { return "constant:" + time.Duration(c).String() }

// Lognormal is exp(N(ln Median, Sigma²)): a long right tail, as real service
// times have.
type Lognormal struct {
	Median time.Duration
	Sigma  float64
}

func (l Lognormal) Sample() time.Duration {
	return time.Duration(float64(l.Median) * math.Exp(l.Sigma*rand.NormFloat64()))
}

func (l Lognormal) Quantile(q float64) time.Duration {
	z := math.Sqrt2 * math.Erfinv(2*q-1)
	return time.Duration(float64(l.Median) * math.Exp(l.Sigma*z))
}

func (l Lognormal) Mean() time.Duration {
	return time.Duration(float64(l.Median) * math.Exp(l.Sigma*l.Sigma/2))
}

func (l Lognormal) String() string {
	return "lognormal:" + l.Median.String() + ":" + strconv.FormatFloat(l.Sigma, 'g', -1, 64)
}

// Exponential has the given mean.
type Exponential time.Duration

func (e Exponential) Sample() time.Duration { return time.Duration(rand.ExpFloat64() * float64(e)) }
func (e Exponential) Quantile(q float64) time.Duration {
	return time.Duration(-math.Log(1-q) * float64(e))
}
func (e Exponential) Mean() time.Duration { return time.Duration(e) }
func (e Exponential) String() string      { return "exponential:" + time.Duration(e).String() }

// Uniform is uniform on [Min, Max].
type Uniform struct{ Min, Max time.Duration }

func (u Uniform) Sample() time.Duration {
	if u.Max == u.Min {
		return u.Min
	}
	return u.Min + rand.N(u.Max-u.Min+1)
}
func (u Uniform) Quantile(q float64) time.Duration {
	return u.Min + time.Duration(q*float64(u.Max-u.Min))
}
func (u Uniform) Mean() time.Duration { return (u.Min + u.Max) / 2 }
func (u Uniform) String() string      { return "uniform:" + u.Min.String() + ":" + u.Max.String() }
