package forecast_test

import (
	"math"
	"testing"
	"time"

	"usher/internal/queue/forecast"
)

func TestNear(t *testing.T) {
	for _, tc := range []struct {
		rate     float64
		batch    int64
		presence time.Duration
		want     int64
	}{
		{1, 1, 0, 50},                                   // at least 50
		{10, 40, 0, 80},                                 // two batches
		{100, 10, 0, 500},                               // five seconds of admissions
		{100, 10, 10 * time.Second, 2000},               // presence + margin of admissions
		{1000, 490, 10 * time.Second, 20000},            // the 10-million plan's room
		{0.5, 1, 30 * time.Second, 50},                  // a slow room: the floor
		{1000, 5000, 10 * time.Second, 20000},           // presence beats two batches of 5,000
		{1000, 15000, 10 * time.Second, 30000},          // two batches beat presence
		{2.5, 1, 10 * time.Second, 50},                  // 50 beats 50 (20 s × 2.5/s)
		{3.3, 1, 10*time.Second + time.Millisecond, 67}, // rounded up
	} {
		if got := forecast.Near(tc.rate, tc.batch, tc.presence); got != tc.want {
			t.Errorf("Near(%v/s, batch %d, presence %v) = %d, want %d", tc.rate, tc.batch, tc.presence, got, tc.want)
		}
	}
}

func TestPace(t *testing.T) {
	const near, rate = 2000, 100.0
	for _, tc := range []struct {
		position int64
		eta      time.Duration
		want     time.Duration
	}{
		{1, 0, forecast.FastPoll},
		{near, time.Hour, forecast.FastPoll},           // the near zone polls fast whatever its ETA
		{near + 1, 5 * time.Second, forecast.FastPoll}, // a tenth of 5 s is below FastPoll
		{100_000, 1000 * time.Second, 100 * time.Second},
		{1_000_000, 10_000 * time.Second, forecast.MaxPoll},
		// A long ETA (measured at a slow rate) just behind the zone: the
		// line could bring the visitor into it in 10 s at 100/s, so it
		// polls again within (10 s + PresenceMargin) ÷ 1.2.
		{near + 1000, time.Hour, 20 * time.Second * 5 / 6},
	} {
		if got := forecast.Pace(tc.position, near, tc.eta, rate); got != tc.want {
			t.Errorf("Pace(%d, ETA %v) = %v, want %v", tc.position, tc.eta, got, tc.want)
		}
	}
	// Further back never polls more often, at any measured rate.
	for _, measured := range []float64{100, 10, 1} {
		prev := time.Duration(0)
		for p := int64(1); p <= 2_000_000; p += 997 {
			eta := time.Duration(float64(p) / measured * float64(time.Second))
			got := forecast.Pace(p, near, min(eta, forecast.MaxETA), rate)
			if got < prev || got < forecast.FastPoll || got > forecast.MaxPoll {
				t.Fatalf("measured %v/s: Pace(%d) = %v after %v, want from FastPoll to MaxPoll, never shorter further back", measured, p, got, prev)
			}
			prev = got
		}
	}
}

// TestPaceSeesPresence: a present visitor polls within PresenceMargin of
// entering the near zone, whatever its place, however slow the measured
// rate that made its ETA, with the longest jitter every time, while the
// line moves at the top rate the whole time.
func TestPaceSeesPresence(t *testing.T) {
	const near, rate = 2000, 100.0
	for _, measured := range []float64{100, 30, 1, 0.01} {
		for _, start := range []int64{near + 1, near + 50, near + 3000, 100_000, 5_000_000} {
			pos, at := float64(start), 0.0 // place, seconds
			for pos > near {
				eta := time.Duration(math.Min(pos/measured, forecast.MaxETA.Seconds()) * float64(time.Second))
				after := forecast.Jitter(forecast.Pace(int64(pos), near, eta, rate), 1-1e-12).Seconds()
				entered := at + (pos-near)/rate // when the line brings it into the zone
				at += after
				pos -= after * rate
				if pos <= near && at-entered > forecast.PresenceMargin.Seconds()+1e-9 {
					t.Errorf("measured %v/s, from place %d: first poll in the zone %.2f s after entering it, want at most %v",
						measured, start, at-entered, forecast.PresenceMargin)
				}
			}
		}
	}
}

func TestJitter(t *testing.T) {
	base := 10 * time.Second
	for _, tc := range []struct {
		u    float64
		want time.Duration
	}{{0, 8 * time.Second}, {0.5, base}, {0.75, 11 * time.Second}} {
		if got := forecast.Jitter(base, tc.u); got != tc.want {
			t.Errorf("Jitter(%v, %v) = %v, want %v", base, tc.u, got, tc.want)
		}
	}
	if got := forecast.Jitter(base, 1-1e-12); got > 12*time.Second || got < 11999*time.Millisecond {
		t.Errorf("Jitter(%v, 1⁻) = %v, want just under 12 s", base, got)
	}
}

func TestFirst(t *testing.T) {
	after := 100 * time.Second
	for _, tc := range []struct {
		u    float64
		want time.Duration
	}{{0, 100 * time.Millisecond}, {0.0005, 100 * time.Millisecond}, {0.01, time.Second}, {0.5, 50 * time.Second}, {1 - 1e-12, after}} {
		if got := forecast.First(after, tc.u); got.Round(time.Millisecond) != tc.want {
			t.Errorf("First(%v, %v) = %v, want %v", after, tc.u, got, tc.want)
		}
	}
}
