package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"usher/internal/booking"
	"usher/internal/queue"
	"usher/internal/sale"
)

// seed creates a demo concert with one schedule of N seats (and the
// schedule's waiting room) and prints the schedule id. The schedule starts
// now: its room opens at once (a schedule's room opens at its StartsAt).
func seed(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := newFlags("seed", getenv, stderr)
	seats := f.Int("seats", 50_000, "number of seats (seed 002 uses 50,000)")
	title := f.String("title", "usher demo concert", "concert title")
	store := f.string("store", "memory", "fast store, as for serve")
	queueStore := f.string("queue-store", "", "queue store, as for serve (the schedule's room is created there; default: --store's)")
	dataDir := f.string("data-dir", "./data", "data directory, as for serve")
	db := f.string("db", "sqlite", "booking database, as for serve")
	redisPrefix := f.string("redis-prefix", "usher:", "prefix of every Redis key")
	asJSON := f.Bool("json", false, `print {"schedule_id":…}`)
	if err := f.parse(args); err != nil {
		return err
	}
	if *seats < 1 || *seats > 1_000_000 {
		f.errs = append(f.errs, fmt.Sprintf("--seats=%d: want 1 to 1000000", *seats))
	}
	if *queueStore == "" {
		*queueStore = *store
	}
	for _, err := range []error{checkStore("store", *store), checkStore("queue-store", *queueStore), checkDB(*db)} {
		if err != nil {
			f.errs = append(f.errs, err.Error())
		}
	}
	if err := f.check(); err != nil {
		return err // before the data dir or the database is touched
	}
	if path, sqlite := sqlitePath(*db); sqlite && path == "" {
		if err := checkWritable(f.setting("data-dir", *dataDir), *dataDir); err != nil {
			return err
		}
	}
	if err := checkDBDir(*db); err != nil {
		return err
	}
	var cl closers
	defer cl.Close()
	fast := fastStores{prefix: *redisPrefix, cl: &cl}
	qs, err := fast.queue(ctx, "queue-store", *queueStore, "")
	if err != nil {
		return err
	}
	catalog, err := openCatalog(ctx, *db, *dataDir, 2, &cl)
	if err != nil {
		return err
	}
	svc := sale.New(sale.Config{Catalog: catalog, Queue: queue.New(qs, queue.Options{})})
	c, err := svc.CreateConcert(ctx, *title)
	if err != nil {
		return err
	}
	sch, err := svc.CreateSchedule(ctx, booking.Schedule{ConcertID: c.ID, StartsAt: time.Now().UTC().Truncate(time.Second)}, time.Time{})
	if err != nil {
		return err
	}
	if _, err := catalog.AddSeats(ctx, sch.ID, demoSeats(*seats)); err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(map[string]int64{"schedule_id": sch.ID})
	}
	fmt.Fprintf(stdout, "schedule %d of concert %d: %d seats, room %s\n", sch.ID, c.ID, *seats, sch.Room)
	return nil
}

// demoSeats lays out n seats: sections A, B, … of 1,000 seats, rows of 50.
func demoSeats(n int) []booking.SeatSpec {
	specs := make([]booking.SeatSpec, n)
	for i := range specs {
		section := string(rune('A' + i/1000%26))
		if i >= 26_000 {
			section += strconv.Itoa(i / 26_000)
		}
		specs[i] = booking.SeatSpec{
			Section: section, Row: strconv.Itoa(i%1000/50 + 1), Number: i%50 + 1, Price: 50_000 + int64(i%1000/250)*30_000,
		}
	}
	return specs
}
