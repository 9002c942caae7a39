package queue

import "time"

// AdmittedWindow is the span over which View.Admitted counts admissions.
const AdmittedWindow = 10 * time.Second

// marks are a room's admissions counted (AdmittedTotal) at past
// refreshes, one a second at most, oldest first, spanning AdmittedWindow
// and no more than a second beyond it. Views share them by pointer and
// never change them: with makes a new one.
type marks struct {
	at    [12]time.Time
	total [12]int64
	n     int
}

// with is m with total recorded at at, when that is a second or more after
// m's last mark (the first always): a new marks without those the window
// no longer needs; else m itself. m may be nil.
func (m *marks) with(at time.Time, total int64) *marks {
	if m == nil {
		m = &marks{}
	} else if m.n > 0 && at.Sub(m.at[m.n-1]) < time.Second {
		return m
	} else {
		c := *m
		m = &c
	}
	m.add(at, total)
	return m
}

// add records total at at and drops the marks the window no longer needs.
func (m *marks) add(at time.Time, total int64) {
	drop := 0
	for drop < m.n-1 && !m.at[drop+1].After(at.Add(-AdmittedWindow)) {
		drop++
	}
	if m.n == len(m.at) && drop == 0 { // refreshes more than a second apart for long: keep the window's span
		drop = 1
	}
	copy(m.at[:], m.at[drop:m.n])
	copy(m.total[:], m.total[drop:m.n])
	m.n -= drop
	m.at[m.n], m.total[m.n] = at, total
	m.n++
}

// Admitted is the room's measured admission rate, visitors per second:
// the admissions its counter shows over the last AdmittedWindow, divided by
// the window (so a few admissions right after this instance first read the
// room do not read as a burst); 0 when nobody was admitted in it. Unlike
// Rate, the ETA's estimate, it starts from nothing and follows no setting:
// it is what happened.
func (v *View) Admitted() float64 {
	if v.marks == nil || v.AdmittedTotal <= v.marks.total[0] { // nothing yet, or counters lost
		return 0
	}
	span := max(v.At.Sub(v.marks.at[0]), AdmittedWindow).Seconds()
	return float64(v.AdmittedTotal-v.marks.total[0]) / span
}
