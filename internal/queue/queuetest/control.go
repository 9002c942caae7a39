package queuetest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"usher/internal/queue"
)

// testAdaptiveRate: an adaptive room's admission step refills its bucket
// at the rate the controller stored (within min_admit_rate and
// max_admit_rate), with the batch of that rate; a static room ignores a
// stored rate.
func testAdaptiveRate(t *testing.T, s queue.Store) {
	ctx := context.Background()
	set := settings(1e6, 10)
	set.Interval = time.Second
	set.Admission, set.MinAdmitRate, set.MaxAdmitRate = queue.Adaptive, 1, 100
	static := set
	static.Admission = queue.Static
	fill(t, s, "adaptive", set, 300)
	fill(t, s, "static", static, 300)
	if c := mustStats(t, s, "adaptive", t0).Control; c != (queue.Control{}) {
		t.Fatalf("a new room's Control = %+v, want zero", c)
	}
	// Before the first step the room admits at admit_rate, 10/s.
	if got := len(mustAdmit(t, s, "adaptive", t0).Admitted); got != 10 {
		t.Errorf("first step before any control: admitted %d, want admit_rate's batch 10", got)
	}
	for _, room := range []string{"adaptive", "static"} {
		next := queue.Control{Rate: 2, Version: 1, At: t0}
		if ok, err := s.(queue.ControlStore).SetControl(ctx, room, next, queue.Signals{}); err != nil || !ok {
			t.Fatalf("SetControl(%s) = %v, %v; want stored", room, ok, err)
		}
	}
	for _, tc := range []struct {
		room string
		rate float64
	}{{"adaptive", 2}, {"static", 10}} {
		now := t0
		mustAdmit(t, s, tc.room, now)
		before := mustStats(t, s, tc.room, now).AdmittedTotal
		for range 10 {
			now = now.Add(time.Second)
			mustAdmit(t, s, tc.room, now)
		}
		if got, want := mustStats(t, s, tc.room, now).AdmittedTotal-before, int64(10*tc.rate); got != want {
			t.Errorf("%s room, stored rate 2/s: admitted %d in 10 s, want %d (%v/s)", tc.room, got, want, tc.rate)
		}
	}
	// The rate in force stays within the bounds when the controller's is
	// outside them (the bounds changed since).
	set.MaxAdmitRate = 1.5
	mustPut(t, s, "adaptive", set)
	now := t0.Add(time.Hour)
	mustAdmit(t, s, "adaptive", now)
	before := mustStats(t, s, "adaptive", now).AdmittedTotal
	for range 10 {
		now = now.Add(time.Second)
		mustAdmit(t, s, "adaptive", now)
	}
	if got := mustStats(t, s, "adaptive", now).AdmittedTotal - before; got < 14 || got > 15 {
		t.Errorf("stored rate 2/s, max_admit_rate 1.5: admitted %d in 10 s, want 15 (-1)", got)
	}
}

// fullControl returns a Control with every field set to a value other
// than zero, by reflection, so that a field forgotten in
// queue.ControlFields or a store fails testControlSteps; Version is 1.
func fullControl(t *testing.T) queue.Control {
	t.Helper()
	var c queue.Control
	v := reflect.ValueOf(&c).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch {
		case f.Type() == reflect.TypeFor[time.Time]():
			f.Set(reflect.ValueOf(t0.Add(time.Duration(i) * time.Second)))
		case f.Type() == reflect.TypeFor[time.Duration]():
			f.SetInt(int64(time.Duration(i+1) * 1234567))
		case f.CanInt():
			f.SetInt(int64(i + 3))
		case f.CanFloat():
			f.SetFloat(float64(i) + 0.25)
		default:
			t.Fatalf("queuetest: no value for Control.%s of type %s: add a case to fullControl", v.Type().Field(i).Name, f.Type())
		}
	}
	c.Version = 1
	return c
}

// testControlSteps: signals pool across calls; SetControl stores a step
// only over the version it read, takes out only the samples it used, and
// keeps its state across PutRoom; both fail with ErrRoomNotFound for an
// unknown room.
func testControlSteps(t *testing.T, s queue.Store) {
	ctx := context.Background()
	mustPut(t, s, "r", settings(10, 1))
	var a, b queue.Signals
	for i := range 30 {
		a.Add(time.Duration(10+i)*time.Millisecond, i%10 == 0)
	}
	b.Add(2*time.Second, true)
	if _, err := s.(queue.ControlStore).AddSignals(ctx, "r", a); err != nil {
		t.Fatal(err)
	}
	pool, err := s.(queue.ControlStore).AddSignals(ctx, "r", b)
	if err != nil {
		t.Fatal(err)
	}
	want := a
	want.Merge(b, 1)
	if pool != want {
		t.Fatalf("pool after two adds = %+v, want %+v", pool, want)
	}
	next := fullControl(t)
	if ok, err := s.(queue.ControlStore).SetControl(ctx, "r", next, a); err != nil || !ok {
		t.Fatalf("SetControl over version 0 = %v, %v; want stored", ok, err)
	}
	if ok, err := s.(queue.ControlStore).SetControl(ctx, "r", queue.Control{Rate: 99, Version: 1}, a); err != nil || ok {
		t.Fatalf("a second SetControl over version 0 = %v, %v; want refused", ok, err)
	}
	if got := mustStats(t, s, "r", t0).Control; got != next {
		t.Errorf("Control = %+v, want %+v", got, next)
	}
	if pool, err = s.(queue.ControlStore).AddSignals(ctx, "r", queue.Signals{}); err != nil || pool != b {
		t.Errorf("pool after the step = %+v, %v; want the samples added since (%+v)", pool, err, b)
	}
	mustPut(t, s, "r", settings(20, 2))
	if got := mustStats(t, s, "r", t0).Control; got != next {
		t.Errorf("Control after PutRoom = %+v, want %+v kept", got, next)
	}
	// Switched to adaptive: the controller starts afresh, and a step over
	// the old state loses; settings that keep it adaptive keep the state.
	adaptive := settings(20, 2)
	adaptive.Admission, adaptive.MinAdmitRate, adaptive.MaxAdmitRate = queue.Adaptive, 1, 100
	mustPut(t, s, "r", adaptive)
	afresh := queue.Control{Version: next.Version + 1}
	if got := mustStats(t, s, "r", t0).Control; got != afresh {
		t.Errorf("Control after switching to adaptive = %+v, want %+v", got, afresh)
	}
	if ok, err := s.(queue.ControlStore).SetControl(ctx, "r", queue.Control{Rate: 99, Version: next.Version + 1}, queue.Signals{}); err != nil || ok {
		t.Errorf("a step over the state before the switch = %v, %v; want refused", ok, err)
	}
	mustPut(t, s, "r", adaptive)
	if got := mustStats(t, s, "r", t0).Control; got != afresh {
		t.Errorf("Control after PutRoom of an adaptive room = %+v, want %+v kept", got, afresh)
	}
	_, err = s.(queue.ControlStore).AddSignals(ctx, "nope", a)
	_, err2 := s.(queue.ControlStore).SetControl(ctx, "nope", next, a)
	if !errors.Is(err, queue.ErrRoomNotFound) || !errors.Is(err2, queue.ErrRoomNotFound) {
		t.Errorf("unknown room: AddSignals err %v, SetControl err %v; want ErrRoomNotFound", err, err2)
	}
}
