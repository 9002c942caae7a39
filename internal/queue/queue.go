// Package queue holds the waiting room's domain: rooms and their settings,
// visitors' entries, the admission step, and the Store interface that the
// backends (memqueue, redisqueue) implement.
//
// A room has a FIFO queue of waiting visitors and an active set of admitted
// visitors, capped at MaxActive. Visitors are ordered by an arrival sequence
// number that the store issues (an INCR), never by wall-clock time, so
// instances with skewed clocks still keep FIFO order. An admitted visitor's
// membership in the active set expires: first after ClaimWindow if the visitor
// never picks up the pass, then ActiveTTL after the last renewal (sliding).
//
// Backends only store; validation, the clock, metrics and the cheap
// estimated status live once in the Queue wrapper (service.go).
package queue

import (
	"context"
	"math"
	"time"

	"usher/internal/fault"
	"usher/internal/queue/forecast"
)

// Errors that every Store returns (wrapped with operation context). The HTTP
// layer maps them to statuses in one table.
var (
	ErrRoomNotFound = fault.New(fault.RoomNotFound, "room not found")
	ErrRoomClosed   = fault.New(fault.RoomClosed, "room closed")
	// ErrSoldOut is ErrRoomClosed of a room whose sale sold out (its state
	// sold_out, or no inventory left): Queue.Enter returns it wrapping
	// ErrRoomClosed, so that a visitor is told the tickets are gone.
	ErrSoldOut = fault.New(fault.SoldOut, "sold out")
	// ErrQueueFull: the room's waiting line is at MaxWaiting.
	ErrQueueFull = fault.New(fault.QueueFull, "the queue is full; try again later")
	// ErrInvalid: input out of range; validators return ErrInvalid.Detail
	// naming the field.
	ErrInvalid = fault.New(fault.Invalid, "invalid input")
	// ErrUnavailable wraps any failure to reach the backend (network, timeout,
	// server down). Callers answer 503 and retry later. Nothing was
	// half-written, but a call that timed out may have run in full: retrying
	// Enter is safe (idempotent), and visitors admitted by a step whose
	// answer was lost lose their slot after ClaimWindow unless they poll.
	ErrUnavailable = fault.New(fault.Unavailable, "store unavailable")
	// ErrRoomInUse: DeleteRoom without force while visitors wait or are
	// active in the room.
	ErrRoomInUse = fault.New(fault.RoomInUse, "visitors are waiting or active in the room; force=true removes them with it")
)

// RoomState says what a room does with arriving and waiting visitors.
type RoomState string

const (
	// Open rooms accept entries and admit visitors.
	Open RoomState = "open"
	// Paused rooms accept entries but admit nobody (a sale not yet started).
	Paused RoomState = "paused"
	// Closed rooms refuse entries; waiting visitors stay until they leave.
	Closed RoomState = "closed"
	// SoldOut rooms behave as closed ones; visitors are told the sale sold
	// out rather than that it closed.
	SoldOut RoomState = "sold_out"
	// InPreQueue is no setting but what visitors are told of an open or
	// paused room before its opening draw (View.RoomState).
	InPreQueue RoomState = "pre_queue"
	// InDrawWindow is what a random room's entrant is told while it waits
	// for its window's draw (View.InDraw).
	InDrawWindow RoomState = "draw"
)

// Refuses reports whether the room refuses new entries (closed or sold out).
func (s RoomState) Refuses() bool { return s == Closed || s == SoldOut }

// Settings are a room's configuration, kept in the store so that every
// instance sees the same. Every field is listed in SettingFields
// (settings.go), with its name, encoding and limits.
type Settings struct {
	State RoomState
	// MaxActive caps the number of admitted visitors at any moment.
	MaxActive int64
	// AdmitRate is the room-wide admission rate in visitors per second, however
	// many schedulers run.
	AdmitRate float64
	// Interval is the scheduler's fixed delay between admission steps.
	Interval time.Duration
	// ActiveTTL is how long an admitted visitor stays active after the last
	// renewal (a gated request or a status poll).
	ActiveTTL time.Duration
	// ClaimWindow is how long an admitted visitor has to pick up the pass
	// before the slot goes to the next one.
	ClaimWindow time.Duration
	// ClientEntersPerMinute bounds the new queue places one client (an
	// address, an IPv6 /64) may take in the room: a burst of this many,
	// refilled over a minute. 0 turns the limit off.
	ClientEntersPerMinute int64
	// PowBits is the proof of work an anonymous entry must bring (leading
	// zero bits of SHA-256; 0 turns it off).
	PowBits int64
	// RequireIdentity refuses entries without a signed identity assertion
	// (package identity) or an admin-named visitor: one account, one place.
	RequireIdentity bool
	// RequireInvite refuses entries without an invite code of the room (a
	// presale), unless the admin names the visitor.
	RequireInvite bool
	// OpensAt, when set, is the opening of a sale (whole milliseconds):
	// before it, entrants join the room's pre-queue and nobody is admitted;
	// at it, the opening draw (draw.go) orders them and later entrants
	// queue behind them. Zero: no pre-queue.
	OpensAt time.Time
	// MaxWaiting caps the waiting line (the pre-queue included): an entry
	// that would make it longer is refused with ErrQueueFull and nothing
	// is created. 0: no cap.
	MaxWaiting int64
	// PresenceTimeout: a waiting visitor near the front (where polls reach
	// the store) not seen for this long is passed over by the admission
	// step, spending no token and no slot; one not seen for ActiveTTL more
	// loses the place. See Store.Admit. 0: everyone is admitted in turn.
	PresenceTimeout time.Duration
	// VisitorsPerUnit caps admissions while the room knows its inventory
	// (Store.SetInventory): admission and passthrough admit only while
	// the active set is below ceil(VisitorsPerUnit × inventory) (and
	// MaxActive). 0 turns the cap off; an inventory of 0 turns the room
	// sold out whatever this is (Stats.EffectiveState).
	VisitorsPerUnit float64
	// Admission says who sets the admission rate: Static (AdmitRate) or
	// Adaptive (the room's controller, control.go, between MinAdmitRate
	// and MaxAdmitRate, starting from AdmitRate).
	Admission Admission
	// TargetP95 is the origin latency the adaptive controller holds at the
	// 95th percentile; 0: 1.5 × the unloaded p95 it learns.
	TargetP95 time.Duration
	// MinAdmitRate and MaxAdmitRate bound the adaptive rate (visitors per
	// second).
	MinAdmitRate, MaxAdmitRate float64
	// ControlPeriod is how often the adaptive controller steps: at least the
	// time an admission takes to show in the origin's latency (the poll
	// that picks up the pass plus the first requests).
	ControlPeriod time.Duration
	// Shards spreads the room's waiting line over this many Redis
	// (Cluster) shards, 1 to MaxShards; ShardStrategy orders it across
	// them (shard.go). Both are fixed once the room exists
	// (ErrShardsFixed; the strategy of a room of one shard may change). A room of more than one shard supports a subset
	// of the settings (Settings.Validate names the one in the way).
	Shards        int64
	ShardStrategy ShardStrategy
	// PriorityShare turns the room's priority lane on (lane.go): the
	// lane's part of each step's admissions, 0.01 to 1; the main line gets
	// the rest, and either all when the other is empty. 0: no lane.
	PriorityShare float64
	// Queueing is how the room takes newcomers (method.go): in arrival
	// order, by lottery in windows of DrawWindow, at once, or not at all.
	Queueing   Queueing
	DrawWindow time.Duration
}

// DefaultSettings are used for a new room's omitted fields.
func DefaultSettings() Settings {
	return Settings{
		State:       Open,
		MaxActive:   1000,
		AdmitRate:   50,
		Interval:    time.Second,
		ActiveTTL:   5 * time.Minute,
		ClaimWindow: 30 * time.Second,
		// Mobile carriers put thousands of users behind one address: 600
		// lets that many newcomers of one address in at the opening and
		// ten a second after, while one bot on one address takes at most
		// 600 places in its first minute and 10/s after.
		ClientEntersPerMinute: 600,
		// Above the longest poll interval (8 s + 20 % jitter), and three
		// times the interval near the head. A false absence costs little:
		// a parked visitor who polls again is admitted first (a tab the
		// browser throttles to a poll a minute loses that minute, not its
		// place); 10 s gave present visitors 95 % of the rate with 30 %
		// of the line leaving silently, 30 s 90 % (docs/benchmarks.md).
		PresenceTimeout: 10 * time.Second,
		// Two admitted visitors per unit left: enough that visitors who
		// look and leave, and holds that lapse, do not leave units
		// unsold; few enough that a sale's last 100 seats are not fought
		// over by thousands (docs/architecture.md, inventory-aware
		// admission).
		VisitorsPerUnit: 2,
		Queueing:        QueueFIFO,
		DrawWindow:      time.Minute,
		Admission:       Static,
		MinAdmitRate:    1,
		MaxAdmitRate:    1000,
		ControlPeriod:   2 * time.Second,
		Shards:          1,
		ShardStrategy:   ShardTimestamp,
	}
}

// Inventory is the units a room's sale has left (neither sold nor held), as
// the sale service last set it (Store.SetInventory). The zero value is
// unknown: a room never set (one without a schedule) acts exactly as if
// there were no inventory at all.
type Inventory struct {
	Units int64
	Known bool
}

// InventoryCap is the most visitors room settings s let be active with
// inventory inv: MaxActive while the inventory is unknown or the cap is off
// (VisitorsPerUnit 0), 0 when nothing is left, else min(MaxActive,
// ceil(VisitorsPerUnit × units)): Limits.Cap.
func InventoryCap(s Settings, inv Inventory) int64 {
	switch {
	case !inv.Known:
		return s.MaxActive
	case inv.Units <= 0:
		return 0
	case s.VisitorsPerUnit <= 0:
		return s.MaxActive
	}
	return min(s.MaxActive, int64(math.Ceil(s.VisitorsPerUnit*float64(inv.Units))))
}

// Near is the near zone of a room with settings s (forecast.Near): the
// places from the head that a store watches for presence. Their polls
// reach the store (View.Near covers them), so a present visitor there is
// seen at least every forecast.PresenceMargin.
func (s Settings) Near() int64 { return forecast.Near(s.AdmitRate, s.Batch(), s.PresenceTimeout) }

// Batch is AdmitRate × Interval rounded up, at least 1: what a step admits
// when it runs every Interval. A new room's token bucket starts with Batch
// tokens.
func (s Settings) Batch() int64 {
	return max(1, int64(math.Ceil(s.AdmitRate*s.Interval.Seconds()-1e-9)))
}

// BucketCapacity is the most tokens the room's bucket holds: Batch + 1.
// The extra token keeps the fraction a step leaves behind (a step admits
// whole visitors), so a rate that is not a whole number per interval, or a
// step that runs a little late, still admits at AdmitRate on average; a
// step admits at most Batch + 1.
func (s Settings) BucketCapacity() float64 { return float64(s.Batch() + 1) }

// ValidRoomID reports whether id is a room id: [a-z0-9][a-z0-9-]{0,63}.
func ValidRoomID(id string) bool {
	if len(id) == 0 || len(id) > 64 || id[0] == '-' {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// MaxVisitorID is the longest visitor id in bytes.
const MaxVisitorID = 128

// ValidVisitorID reports whether id is a visitor id: 1 to 128 printable ASCII
// bytes without spaces.
func ValidVisitorID(id string) bool {
	if len(id) == 0 || len(id) > MaxVisitorID {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// EntryStatus is where a visitor stands in a room.
type EntryStatus string

const (
	Waiting EntryStatus = "waiting"
	Active  EntryStatus = "active"
	// Gone means neither waiting nor active: never entered, left, or expired.
	Gone EntryStatus = "gone"
)

// Entry is a visitor's place in a room.
type Entry struct {
	Visitor string
	Status  EntryStatus
	// Seq is the arrival sequence number (1, 2, …, per room) when Waiting,
	// and in the result of the Enter that created the entry; otherwise 0.
	Seq int64
	// Position is 1 for the head of the queue, when Waiting.
	Position int64
	// ExpiresAt is when the active slot lapses without renewal, when Active.
	// Backends may return it in another time zone: compare with Equal.
	ExpiresAt time.Time
}

// AdmitResult is what one admission step did.
type AdmitResult struct {
	// Admitted lists the visitors moved into the active set, in arrival order.
	Admitted []string
	// Expired counts active visitors removed because their expiry had passed.
	Expired int64
	// Skipped counts waiting visitors passed over as absent
	// (PresenceTimeout); Abandoned those of them removed from the line.
	Skipped, Abandoned int64
}

// Stats is a room's settings and live counters, read in one call.
type Stats struct {
	Settings Settings
	Waiting  int64
	// Lane counts the visitors waiting in the priority lane (they are in
	// Waiting too).
	Lane int64
	// Active counts admitted visitors whose expiry is after now.
	Active        int64
	AdmittedTotal int64
	// LastSeq is the last sequence number issued (0 before the first entry).
	LastSeq int64
	// HeadSeq is the sequence number of the first waiting visitor, or
	// LastSeq+1 when nobody waits. Before the draw, pre-queue entrants
	// have no sequence number and are not counted in HeadSeq or LastSeq
	// (they are in Waiting).
	HeadSeq int64
	// Draw is the room's opening draw, if it has one.
	Draw Draw
	// Since is when the store began keeping the room's queue, if it may
	// have lost the places of tickets issued before (a memory store's
	// restart, a Redis failover): tickets issued earlier get exact answers
	// (Queue.Status) and new tickets (Queue.Reticket). Zero: never.
	Since time.Time
	// Inventory is the units left for sale, when the sale service set it.
	Inventory Inventory
	// Control is the adaptive controller's state (zero for a room whose
	// controller never stepped).
	Control Control
	// Window is a random room's current draw window (zero before its
	// first random entry).
	Window DrawnWindow
	// Off names the settings (by JSON name) that the store keeps off for
	// this room because its line cannot do them (a sharded room's).
	Off []string
}

// EffectiveState is the state the room acts in: Settings.State, except
// that an open or paused room whose known inventory is 0 is SoldOut until
// the inventory comes back. The operator's closed and sold_out win.
func (st Stats) EffectiveState() RoomState {
	if st.Inventory.Known && st.Inventory.Units == 0 && !st.Settings.State.Refuses() {
		return SoldOut
	}
	return st.Settings.State
}

// A Waker is a store shared by several instances that tells each of them
// when a room's settings or inventory changed, so that a room nobody waits
// in need not be read often (Options.IdleRefresh). Wakes calls wake with
// each such room's name until ctx ends or the store's feed breaks (an
// error: the caller subscribes again); a wake may be lost, never invented.
type Waker interface {
	Wakes(ctx context.Context, wake func(room string)) error
}

// Store keeps rooms. Every method is one atomic operation on the backend:
// concurrent calls from any number of instances never leave half-written
// state. Methods return ErrRoomNotFound for an unknown room and wrap backend
// faults in ErrUnavailable. The caller validates ids and settings; now is the
// caller's clock.
type Store interface {
	// PutRoom creates a room or replaces its settings; queue, active set and
	// counters are kept. With o.OnlyCreate an existing room is left
	// unchanged. created reports whether the room is new. When s.OpensAt
	// is set and the room has no draw seed yet, the store chooses one
	// (NewSeed) and keeps it for good. Settings that switch an existing
	// room whose controller has stepped to Adaptive reset its controller
	// state in the same step (a zero Control with the next Version), so
	// the controller starts afresh and a concurrent step over the old
	// state loses.
	PutRoom(ctx context.Context, room string, s Settings, o PutOptions) (created bool, err error)
	// Rooms lists room ids in ascending order.
	Rooms(ctx context.Context) ([]string, error)
	// Enter puts visitor in the room's queue, or returns its current entry if
	// it is already waiting or active (idempotent: a visitor never moves
	// back). created is true only for a new queue place. When nobody waits,
	// the room is open, a slot is free (below MaxActive and InventoryCap) and
	// the rate allows, the visitor is admitted at once (passthrough) with
	// expiry now+ActiveTTL. ErrRoomClosed when the room is closed or sold
	// out (EffectiveState) and the visitor has no entry.
	//
	// Opening draw (draw.go): while Draw.PreQueue, a new entrant joins the
	// pre-queue, unordered: Waiting with Seq and Position 0, never
	// passthrough. When Draw.Due, Enter, Status and Admit first draw:
	// pre-queue entrants queue in DrawKey order behind those already
	// waiting and ahead of every later entrant. A drawn entrant's Seq may be
	// reported before the store assigns it (Redis assigns them as the
	// admission reaches them); a Seq reported once never grows, and
	// Position is always exact.
	//
	// With o.Lane, a new place is in the room's priority lane (lane.go):
	// an existing entry wins (a visitor waiting in the main line keeps
	// that place) and uses nothing; a new place (or a passthrough) uses
	// the code once, refused with ErrLaneCodeUsed once it has made
	// code.Uses places, counted atomically with the entry. ErrLanesOff
	// when the room's PriorityShare is 0.
	Enter(ctx context.Context, room, visitor string, now time.Time, o EnterOptions) (e Entry, created bool, err error)
	// Status returns the visitor's exact entry. For an active visitor it is
	// also a renewal: the expiry becomes at least now+ActiveTTL (this is how
	// an admitted visitor claims the slot, and how the gate slides it).
	Status(ctx context.Context, room, visitor string, now time.Time) (Entry, error)
	// Leave removes the visitor's queue place or active slot at once.
	// Leaving a room one is not in is not an error.
	Leave(ctx context.Context, room, visitor string) error
	// Admit runs one admission step: it removes active visitors whose expiry
	// is at or before now, then admits min(InventoryCap-active, tokens,
	// waiting) visitors from the head of the queue with expiry
	// now+ClaimWindow. Tokens come from a room-wide bucket refilled at
	// AdmitRate up to BucketCapacity(), kept in the same atomic step, so any
	// number of concurrent callers admit at AdmitRate in total and never
	// exceed MaxActive, nor the inventory's cap. A paused, closed or sold-out
	// room (EffectiveState), or one before its draw, admits nobody (expiry
	// still runs, and so does the removal of parked visitors absent past
	// PresenceTimeout+ActiveTTL). With PresenceTimeout, parked visitors who
	// came back are taken first, then present ones from the head, parking
	// the absent (AdmitResult.Skipped). Every step watches the near zone;
	// a visitor it marks there while the room admits nobody, and a drawn
	// entrant, is taken only after a poll has seen it (passed over, place
	// kept, until PresenceTimeout, then parked), and nobody marked after it
	// is taken before it.
	Admit(ctx context.Context, room string, now time.Time) (AdmitResult, error)
	// Stats reads the room's settings, counters, draw and inventory; it
	// never draws.
	Stats(ctx context.Context, room string, now time.Time) (Stats, error)
	// SetInventory records the units the room's sale has left (0 to
	// MaxInventory; the caller validates). It changes no setting: while it
	// is 0 the room acts sold out (Stats.EffectiveState: Enter refuses
	// newcomers with ErrRoomClosed, Admit and passthrough admit nobody),
	// and while it is low Admit and passthrough keep the active set
	// below InventoryCap. A room never set acts as before (unknown).
	SetInventory(ctx context.Context, room string, units int64) error

	// DeleteRoom removes the room and everything the store keeps of it
	// (settings, queue, active set, counters, draw, inventory; its record
	// in the room list and, for a store that keeps rooms on disk, there).
	// Unless force, it refuses with ErrRoomInUse, changing nothing, while
	// anyone waits (the pre-queue included) or holds an unexpired active
	// slot at now; the check and the removal are one atomic step.
	DeleteRoom(ctx context.Context, room string, force bool, now time.Time) error
}

// PutOptions say how PutRoom treats a room that exists.
type PutOptions struct {
	// OnlyCreate leaves an existing room as it is.
	OnlyCreate bool
}

// EnterOptions say where Enter puts a new place; the zero value is the
// main line.
type EnterOptions struct {
	// Lane, when set, puts a new place in the priority lane with this code.
	Lane *LaneCode
}

// ControlStore keeps a room's adaptive controller state (control.go): the
// pool of origin signals and the controller's last step. Admit and Enter
// refill the bucket at Settings.CurrentRate(Control), so a Store that
// implements ControlStore serves adaptive rooms; Queue finds it on the
// Store it wraps, and refuses adaptive rooms on a Store without it.
type ControlStore interface {
	// AddSignals adds s to the room's pool of origin signals and returns
	// the pool, in one atomic step.
	AddSignals(ctx context.Context, room string, s Signals) (Signals, error)
	// SetControl stores next as the room's controller state if the stored
	// state's Version is next.Version-1, and then takes used out of the
	// pool (samples added since stay for the next step), atomically. ok is
	// false, and nothing changes, when another caller stepped first.
	SetControl(ctx context.Context, room string, next Control, used Signals) (ok bool, err error)
}
