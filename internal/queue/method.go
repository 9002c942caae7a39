package queue

import "time"

// Queueing is how a room takes newcomers (Settings.Queueing), switchable
// while it runs:
//
//   - QueueFIFO: in arrival order.
//   - QueueRandom: a lottery all along. The clock is cut into windows of
//     Settings.DrawWindow (Unix time, so every instance agrees); each
//     window's entrants are drawn among themselves and queue behind every
//     earlier window's. The store draws as they come: a newcomer takes the
//     place of one of the window's entrants chosen uniformly (or its own,
//     at the end), who moves to the newcomer's (DrawSlot: an inside-out
//     Fisher–Yates shuffle, so the window ends in a uniformly random order).
//     Until its window ends an entrant is told it waits for the draw
//     (position 0, as in the pre-queue, with the window's end); its place
//     is exact from then on. Near the head (the near zone) nobody is moved.
//   - QueuePassthrough: no line. Entries are admitted at once and steps
//     admit whoever waits, with no cap, rate or inventory cap (Limits);
//     passes are issued and counted as usual.
//   - QueueReject: newcomers are refused (ErrRoomClosed: the closed page);
//     those already waiting keep their places and are admitted as before.
//
// On a switch nobody already waiting moves: to random, windows start with
// the next newcomer; from random, the open window keeps the order drawn so
// far; to passthrough, the next step admits the whole line (up to
// PassthroughBatch a step), newcomers from when it is empty; from
// passthrough, the cap holds again and admissions wait for the active set
// to fall below it.
type Queueing string

const (
	QueueFIFO        Queueing = "fifo"
	QueueRandom      Queueing = "random"
	QueuePassthrough Queueing = "passthrough"
	QueueReject      Queueing = "reject"
)

// The range of Settings.DrawWindow.
const (
	MinDrawWindow = time.Second
	MaxDrawWindow = time.Hour
)

// PassthroughBatch is the most a passthrough room's step admits: a line of
// any length drains in steps that keep the store responsive.
const PassthroughBatch = 10_000

// TakesNewcomers reports whether a room with settings s gives newcomers a
// place (its state may still refuse them: RoomState.Refuses).
func (s Settings) TakesNewcomers() bool { return s.Queueing != QueueReject }

// DrawWindow returns the index of the draw window of length w that holds
// now, and when it ends.
func DrawWindow(now time.Time, w time.Duration) (index int64, ends time.Time) {
	ms := w.Milliseconds()
	index = now.UnixMilli() / ms
	return index, time.UnixMilli((index + 1) * ms).UTC()
}

// DrawSlot is where a random room's newcomer goes among the n entrants of
// its window that may move (behind the near zone), given u uniform in
// [0, 1): 0 to n-1 takes that entrant's place (counted from the first of
// them, who moves to the end), n keeps its own at the end.
func DrawSlot(n int64, u float64) int64 {
	if n <= 0 {
		return 0
	}
	return min(n, int64(u*float64(n+1)))
}

// InDraw reports whether waiting entry e of a random room waits for its
// window's draw at now, by view v: it is behind the near zone (where
// nobody moves) and entered in the current window (v.Window is the first
// seq of the window v knows) or after the last seq v knows (since v was
// read).
func (v *View) InDraw(now time.Time, e Entry) bool {
	if v.Settings.Queueing != QueueRandom || e.Status != Waiting || e.Seq <= 0 || e.Position <= v.Near() {
		return false
	}
	i, _ := DrawWindow(now, v.Settings.DrawWindow)
	return e.Seq > v.LastSeq || i == v.Window.Index && e.Seq >= v.Window.Seq
}

// drawPending reports whether a ticket issued at issued for a place in
// the draw (PreQueueSeq) still waits for it at now, by view v: it was
// issued in the current window (and not in a pre-queue before the
// opening), and the whole window is behind the near zone, so no admission
// can have reached it.
func (v *View) drawPending(now, issued time.Time) bool {
	if v.Settings.Queueing != QueueRandom || issued.Before(v.Settings.OpensAt) {
		return false
	}
	i, _ := DrawWindow(now, v.Settings.DrawWindow)
	j, _ := DrawWindow(issued, v.Settings.DrawWindow)
	return i == j && i == v.Window.Index && v.Window.Seq-v.HeadSeq+1 > v.Near()
}

// DrawnWindow is a random room's current draw window as the store keeps
// it: its index (DrawWindow) and the first sequence number given in it.
type DrawnWindow struct {
	Index, Seq int64
}
