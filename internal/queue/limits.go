package queue

import (
	"math"
	"strconv"
	"time"
)

// Limits are the numbers a room's admission rules make of its settings,
// its adaptive controller's state and its inventory. They are computed by
// Settings.Limits and nowhere else; every store applies them as they are.
// memqueue computes them at each call. The Redis stores keep them in the
// room's hash (LimitFields) beside their inputs: each write of an input
// bumps the hash's rules_v, the writer then stores the limits computed
// from what the hash holds (RefreshLimits), and a step refuses limits
// older than their inputs (docs/architecture.md#admission-rules).
type Limits struct {
	// Cap is the most visitors that may be active (InventoryCap).
	Cap int64
	// Rate is the token bucket's refill in visitors a second (CurrentRate)
	// and Batch what a step admits at it (Batch): the bucket holds
	// Batch + 1 tokens.
	Rate  float64
	Batch int64
	// Near is the near zone (Settings.Near at Rate), watched for presence.
	Near int64
	// Presence is the presence timeout (0: off) and Grace how long a parked
	// visitor keeps its place unseen: PresenceTimeout + ActiveTTL.
	Presence, Grace time.Duration
}

// Limits returns the limits of a room with settings s, controller state c
// and inventory inv. A passthrough room (QueuePassthrough) has no cap and
// the highest rate, in steps of at most PassthroughBatch.
func (s Settings) Limits(c Control, inv Inventory) Limits {
	cur := s.Current(c)
	if s.Queueing == QueuePassthrough {
		return Limits{
			Cap: math.MaxInt64, Rate: MaxAdmitRate, Batch: PassthroughBatch, Near: cur.Near(),
			Presence: s.PresenceTimeout, Grace: s.PresenceTimeout + s.ActiveTTL,
		}
	}
	return Limits{
		Cap:      InventoryCap(s, inv),
		Rate:     cur.AdmitRate,
		Batch:    cur.Batch(),
		Near:     cur.Near(),
		Presence: s.PresenceTimeout,
		Grace:    s.PresenceTimeout + s.ActiveTTL,
	}
}

// BucketCapacity is the most tokens the bucket holds: Batch + 1.
func (l Limits) BucketCapacity() float64 { return float64(l.Batch + 1) }

// LimitFields encodes l as the hash fields the Redis stores' scripts read
// by name: name/value pairs, durations in milliseconds.
func (l Limits) LimitFields() []string {
	return []string{
		"lim_cap", strconv.FormatInt(l.Cap, 10),
		"lim_rate", strconv.FormatFloat(l.Rate, 'g', -1, 64),
		"lim_batch", strconv.FormatInt(l.Batch, 10),
		"lim_near", strconv.FormatInt(l.Near, 10),
		"lim_presence_ms", strconv.FormatInt(l.Presence.Milliseconds(), 10),
		"lim_grace_ms", strconv.FormatInt(l.Grace.Milliseconds(), 10),
	}
}
