package capacity

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"usher/internal/queue"
	"usher/internal/wire"
)

func seed002() Input {
	in := DefaultInput()
	in.Pool, in.ServiceTime, in.Batch = 10, 76*time.Millisecond, 35
	return in
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

// TestSeed002 checks the planner against seed 002's worked numbers: pool 10,
// p95 76 ms → ~131 TPS; × 0.7 → ~90; TTL 3 min → 16,200; batch 35 → ~389 ms
// → 500 ms.
func TestSeed002(t *testing.T) {
	p, err := Make(seed002())
	if err != nil {
		t.Fatal(err)
	}
	if !near(p.RawTPS, 131.58, 0.01) {
		t.Errorf("RawTPS = %v, want 10 / 0.076 = 131.58", p.RawTPS)
	}
	if !near(p.SafeTPS, 92.1, 0.01) || p.TPS != 90 {
		t.Errorf("SafeTPS, TPS = %v, %v, want 92.1 rounded down to 90", p.SafeTPS, p.TPS)
	}
	if p.MaxActive != 16_200 {
		t.Errorf("MaxActive = %d, want 90 × 180 = 16200", p.MaxActive)
	}
	if p.Batch != 35 {
		t.Errorf("Batch = %d, want 35", p.Batch)
	}
	if got := p.RawInterval.Round(time.Millisecond); got != 389*time.Millisecond {
		t.Errorf("RawInterval = %v, want 35 / 90 = 389ms", got)
	}
	if p.RoundedInterval != 500*time.Millisecond {
		t.Errorf("RoundedInterval = %v, want 500ms", p.RoundedInterval)
	}
	// The room keeps 90/s with the longest interval whose usher batch,
	// ceil(rate × interval), is the preferred 35.
	want := room{State: "open", MaxActive: 16_200, AdmitRate: 90, IntervalMS: 388, ActiveTTLSeconds: 180, ClaimWindowSeconds: 30}
	if diff := cmp.Diff(want, plain(p.Room)); diff != "" {
		t.Errorf("Room mismatch (-want +got):\n%s", diff)
	}
	if p.RoomBatch != 35 {
		t.Errorf("RoomBatch = %d, want 35", p.RoomBatch)
	}
	if len(p.Notes) != 0 {
		t.Errorf("Notes = %q, want none", p.Notes)
	}
}

func TestSeed002RoundedInterval(t *testing.T) {
	in := seed002()
	in.RoundInterval = true
	p, err := Make(in)
	if err != nil {
		t.Fatal(err)
	}
	// Seed 002's final settings: 35 every 500 ms, which is 70 visitors/s.
	if p.room.Interval.Milliseconds() != 500 || p.room.AdmitRate != 70 || p.RoomBatch != 35 {
		t.Errorf("room interval %d ms, rate %v, batch %d, want 500 ms, 70/s, 35", p.room.Interval.Milliseconds(), p.room.AdmitRate, p.RoomBatch)
	}
	if p.MaxActive != 16_200 {
		t.Errorf("MaxActive = %d, want 16200 (from the TPS)", p.MaxActive)
	}
}

func TestRoomBatchNeverExceedsPreferred(t *testing.T) {
	for _, tc := range []struct {
		pool  int
		w     time.Duration
		batch int
	}{
		{10, 76 * time.Millisecond, 35}, {10, 50 * time.Millisecond, 1}, {7, 33 * time.Millisecond, 13},
		{200, 20 * time.Millisecond, 997}, {3, 900 * time.Millisecond, 2}, {10, 51 * time.Millisecond, 36},
	} {
		in := DefaultInput()
		in.Pool, in.ServiceTime, in.Batch = tc.pool, tc.w, tc.batch
		p, err := Make(in)
		if err != nil {
			t.Fatal(err)
		}
		if p.RoomBatch > int64(tc.batch) && len(p.Notes) == 0 {
			t.Errorf("%+v: room batch %d above the preferred %d without a note", tc, p.RoomBatch, tc.batch)
		}
		// The planned room's interval setting (whole milliseconds) against
		// the longest usher takes: a setting, not a time measured.
		longer := p.room.Interval + time.Millisecond
		if p.RoomBatch < int64(tc.batch) && p.room.Interval < queue.MaxInterval && usherBatch(p.room.AdmitRate, longer) <= int64(tc.batch) {
			t.Errorf("%+v: room batch %d below the preferred %d: the interval %d ms could be longer", tc, p.RoomBatch, tc.batch, p.room.Interval.Milliseconds())
		}
		if p.room.AdmitRate != p.AdmitRate {
			t.Errorf("%+v: room rate %v, want the planned %v", tc, p.room.AdmitRate, p.AdmitRate)
		}
	}
}

func TestBatchFromBurstTarget(t *testing.T) {
	in := DefaultInput()
	in.Pool, in.ServiceTime = 10, 76*time.Millisecond
	p, err := Make(in)
	if err != nil {
		t.Fatal(err)
	}
	// ⌊500 / 76⌋ = 6 waves of 10, × 0.7 = 42.
	if p.Batch != 42 {
		t.Errorf("Batch = %d, want 42", p.Batch)
	}
	// Visitors of 10 requests each: 42 requests are 4 visitors.
	in.RequestsPerVisitor = 10
	if p, err = Make(in); err != nil || p.Batch != 4 {
		t.Errorf("Batch = %d (%v), want 4 visitors of 10 requests", p.Batch, err)
	}
}

func TestIntervalGiven(t *testing.T) {
	in := seed002()
	in.Batch, in.Interval = 0, 500*time.Millisecond
	p, err := Make(in)
	if err != nil {
		t.Fatal(err)
	}
	if p.Batch != 45 || p.RoomBatch != 45 || p.room.Interval.Milliseconds() != 500 || p.room.AdmitRate != 90 {
		t.Errorf("batch %d, room batch %d, interval %d, rate %v; want 45, 45, 500, 90", p.Batch, p.RoomBatch, p.room.Interval.Milliseconds(), p.room.AdmitRate)
	}
}

func TestRequestsPerVisitor(t *testing.T) {
	in := seed002()
	in.RequestsPerVisitor = 3
	p, err := Make(in)
	if err != nil {
		t.Fatal(err)
	}
	if p.AdmitRate != 30 || p.MaxActive != 5400 {
		t.Errorf("admit rate %v, max active %d, want 30/s and 5400", p.AdmitRate, p.MaxActive)
	}
}

func TestInvalid(t *testing.T) {
	for name, change := range map[string]func(*Input){
		"no pool":            func(in *Input) { in.Pool = 0 },
		"no service time":    func(in *Input) { in.ServiceTime = 0 },
		"margin above 1":     func(in *Input) { in.Margin = 1.5 },
		"margin 0":           func(in *Input) { in.Margin = 0 },
		"short ttl":          func(in *Input) { in.TTL = time.Millisecond },
		"batch and interval": func(in *Input) { in.Interval = time.Second },
		"tiny interval":      func(in *Input) { in.Batch, in.Interval = 0, time.Millisecond },
		"requests below 1":   func(in *Input) { in.RequestsPerVisitor = 0.5 },
	} {
		in := seed002()
		change(&in)
		if _, err := Make(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
}

func TestRounding(t *testing.T) {
	for _, tc := range []struct{ in, want float64 }{
		{92.105, 90}, {131.58, 130}, {29, 28}, {9.7, 9.5}, {1316, 1300}, {100, 100}, {0.73, 0.7},
	} {
		if got := FloorRound(tc.in); !near(got, tc.want, 1e-9) {
			t.Errorf("FloorRound(%v) = %v, want %v", tc.in, got, tc.want)
		}
		if got := FloorRound(tc.in); got > tc.in || got < 0.9*tc.in {
			t.Errorf("FloorRound(%v) = %v: want within 10 %% below", tc.in, got)
		}
	}
	for _, tc := range []struct{ in, want time.Duration }{
		{389 * time.Millisecond, 500 * time.Millisecond}, {120 * time.Millisecond, 200 * time.Millisecond},
		{500 * time.Millisecond, 500 * time.Millisecond}, {1100 * time.Millisecond, 2 * time.Second},
		{7 * time.Millisecond, 10 * time.Millisecond}, {600 * time.Microsecond, time.Millisecond},
	} {
		if got := CeilRound(tc.in); got != tc.want {
			t.Errorf("CeilRound(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestWriteTextShowsTheReasoning(t *testing.T) {
	p, err := Make(seed002())
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := p.WriteText(&b, "http://127.0.0.1:8090", "sale"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"10 (pool) ÷ 0.076 s (service time) = 131.6 req/s",
		"131.6 × 0.7 = 92.1 req/s, rounded down to 90 req/s",
		"90 visitors/s × 180 s (active TTL) = 16,200 visitors",
		"35 ÷ 90/s = 389ms; the room uses 388ms", // what the room gets, not 500ms
		"interval 388ms in the room (389ms exact; seed 002 rounds it to 500ms)",
		`"max_active":16200`, `"interval_ms":388`, `"admit_rate":90`,
		"curl -X PUT", "http://127.0.0.1:8090/api/v1/rooms/sale",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
}

func TestJSON(t *testing.T) {
	p, err := Make(seed002())
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Input struct {
			Pool          int     `json:"pool"`
			ServiceTimeMS float64 `json:"service_time_ms"`
			TTLSeconds    float64 `json:"ttl_s"`
		} `json:"input"`
		TPS           float64           `json:"tps"`
		MaxActive     int64             `json:"max_active"`
		RawIntervalMS float64           `json:"raw_interval_ms"`
		RoundedMS     float64           `json:"rounded_interval_ms"`
		Room          wire.RoomSettings `json:"room"`
		Steps         []Step            `json:"steps"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Input.Pool != 10 || got.Input.ServiceTimeMS != 76 || got.Input.TTLSeconds != 180 || got.TPS != 90 ||
		got.MaxActive != 16200 || !near(got.RawIntervalMS, 388.9, 0.1) || got.RoundedMS != 500 ||
		!cmp.Equal(got.Room, p.Room) || len(got.Steps) != len(p.Steps) {
		t.Errorf("JSON round trip lost something:\n%s", b)
	}
}

// room is a plan's room settings as plain values, for comparisons.
type room struct {
	State                                           string
	MaxActive, IntervalMS                           int64
	AdmitRate, ActiveTTLSeconds, ClaimWindowSeconds float64
}

func plain(rs wire.RoomSettings) room {
	var r room
	for name, v := range map[string]any{"state": &r.State, "max_active": &r.MaxActive, "interval_ms": &r.IntervalMS,
		"admit_rate": &r.AdmitRate, "active_ttl_seconds": &r.ActiveTTLSeconds, "claim_window_seconds": &r.ClaimWindowSeconds} {
		if ok, err := rs.Get(name, v); !ok || err != nil {
			panic(fmt.Sprintf("plan room: %s missing or not decoded: %v", name, err))
		}
	}
	return r
}
