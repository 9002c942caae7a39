package forecast

import (
	"math"
	"time"
)

// The pacing of polls (seed 003 §3: more often near the front, with
// jitter), and its bounds:
//   - FastPoll in the near zone, where presence is watched and where a
//     visitor's turn comes within seconds;
//   - MaxPoll far back: a visitor learns of a pause, a sell-out or a
//     changed ETA within MaxPoll + 20 %, and a browser throttles the timers
//     of a tab hidden for five minutes to about one a minute anyway
//     (Chrome's intensive throttling), so a minute or two is what many
//     waiting tabs do whatever usher asks;
//   - between them a tenth of the ETA: a visitor sees its ETA updated ten
//     times over its wait, and polls fall as 1 ÷ ETA down the line;
//   - a new place's first poll at a random point of its interval (First),
//     so that visitors placed in the same second do not poll in step.
const (
	// FastPoll is the poll interval in the near zone.
	FastPoll = 1500 * time.Millisecond
	// MaxPoll is the longest poll interval before jitter.
	MaxPoll = 2 * time.Minute
	// PresenceMargin is the longest a present visitor goes without a poll
	// after entering the near zone (Pace).
	PresenceMargin = 10 * time.Second
	// jitterMax is the largest factor Jitter applies.
	jitterMax = 1.2
)

// Near is the near zone of a line that admits rate visitors a second in
// batches of batch, with presence timeout presence (0: off): the places
// from the head whose visitors poll every FastPoll, get their exact place
// from the store, and are watched for presence. It is two batches, five
// seconds of admissions, and at least 50; with presence, presence +
// PresenceMargin of admissions when that is more, so that a visitor who
// left before coming near crosses the zone for at least presence +
// PresenceMargin and is absent by the time it reaches the head.
func Near(rate float64, batch int64, presence time.Duration) int64 {
	n := max(50, 2*batch, int64(math.Ceil(5*rate)))
	if presence > 0 {
		n = max(n, int64(math.Ceil((presence+PresenceMargin).Seconds()*rate)))
	}
	return n
}

// Pace is the poll interval before jitter of a visitor at position (1 at
// the head), told eta, in a line whose near zone is near places long and
// that admits at most rate visitors a second: FastPoll in the near zone;
// behind it a tenth of the ETA, from FastPoll to MaxPoll, and never longer
// than the line could take at rate to bring the visitor into the near zone
// plus PresenceMargin, jitter included: a present visitor polls within
// PresenceMargin of entering the zone even when the ETA, measured at a
// slower rate, is long.
func Pace(position, near int64, eta time.Duration, rate float64) time.Duration {
	if position <= near {
		return FastPoll
	}
	base := min(max(eta/10, FastPoll), MaxPoll)
	if rate > 0 {
		reach := float64(position-near)/rate*float64(time.Second) + float64(PresenceMargin)
		base = min(base, time.Duration(reach/jitterMax))
	}
	return base
}

// Jitter spreads a poll interval: base × (0.8 + 0.4u) for u in [0, 1),
// uniform around base, so that a visitor's intervals average to base. The
// caller draws u (a simulation passes its own seeded one).
func Jitter(base time.Duration, u float64) time.Duration {
	return time.Duration(float64(base) * (2 - jitterMax + 2*(jitterMax-1)*u))
}

// First is the first poll interval of a new place: a uniformly random
// point of after (a jittered interval) for u in [0, 1), no sooner than
// 100 ms (an answer never says to poll at once). Visitors
// who get their places in the same second (a sale's opening, a draw)
// would otherwise poll together every interval, in waves that the jitter
// smooths only over many intervals: with 2 min intervals, a million
// entrants in 30 s polled at 1.9 × the steady rate two minutes later
// (capacity's simulation).
func First(after time.Duration, u float64) time.Duration {
	return max(time.Duration(float64(after)*u), 100*time.Millisecond)
}
