package httpapi_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/queue/redisroute"
	"usher/internal/queue/redisshard"
	"usher/internal/testenv"
	"usher/internal/wire"
)

// TestShardedRoom makes a room of four shards through PUT
// /api/v1/rooms/{room} and takes visitors from their entry to their pass,
// refused on memory (one line per room), taken on Redis, single and
// Cluster (the line spread over hash tags the cluster places on several
// primaries). Settings a sharded room lacks, and a change of its layout,
// are 400 with nothing written.
func TestShardedRoom(t *testing.T) {
	t.Parallel()
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		// One process keeps one line per room: the memory store refuses.
		e := newEnvOn(t, memqueue.New(), false)
		if r := e.do(nil, "PUT", "/api/v1/rooms/hot", adminKey, `{"shards":4}`); r.status != 400 || r.errorCode(t) != "invalid_request" ||
			!strings.Contains(string(r.body), "shards") {
			t.Errorf("PUT a sharded room on memory: %d %s, want 400 invalid_request naming shards", r.status, r.body)
		}
	})
	for _, target := range []struct{ name, env string }{{"redis", "USHER_TEST_REDIS"}, {"cluster", "USHER_TEST_REDIS_CLUSTER"}} {
		t.Run(target.name, func(t *testing.T) {
			t.Parallel()
			c := testenv.RedisAt(t, target.env)
			testShardedRoom(t, redisroute.New(c, testenv.RedisPrefix(t, c)))
		})
	}
}

func testShardedRoom(t *testing.T, qs queue.Store) {
	e := newEnvOn(t, qs, false)
	const sharded = `"shards":4,"shard_strategy":"timestamp","presence_timeout_seconds":0,"claim_window_seconds":300`
	for _, bad := range []struct{ body, names string }{
		{`{"shards":4,"presence_timeout_seconds":20}`, "presence_timeout"}, // what a sharded room lacks, set
		{`{` + sharded + `,"max_waiting":10}`, "max_waiting"},
		{`{` + sharded + `,"opens_at":"2030-01-01T10:00:00Z"}`, "opens_at"},
		{`{"shards":0}`, "shards"},
		{`{"shards":65}`, "shards"},
	} {
		r := e.do(nil, "PUT", "/api/v1/rooms/hot", adminKey, bad.body)
		if r.status != 400 || r.errorCode(t) != "invalid_request" || !strings.Contains(string(r.body), bad.names) {
			t.Errorf("PUT %s: %d %s, want 400 invalid_request naming %s", bad.body, r.status, r.body, bad.names)
		}
	}
	if r := e.do(nil, "GET", "/api/v1/rooms/hot", adminKey, ""); r.status != 404 {
		t.Fatalf("GET the room after refused PUTs: %d %s, want 404 (nothing written)", r.status, r.body)
	}

	// A sharded room accepts every default: what its line lacks is off,
	// and its answer says so.
	r := e.do(nil, "PUT", "/api/v1/rooms/defaults", adminKey, `{"shards":3}`)
	var defaults wire.Room
	if err := json.Unmarshal(r.body, &defaults); r.status != 201 || err != nil ||
		!slices.Equal(defaults.OffForShards, redisshard.Off) ||
		setting[float64](defaults.Settings, "presence_timeout_seconds") != 0 || setting[float64](defaults.Settings, "visitors_per_unit") != 2 ||
		setting[float64](defaults.Settings, "claim_window_seconds") != setting[float64](defaults.Settings, "active_ttl_seconds") {
		t.Errorf("PUT {\"shards\":3}: %d %s, want 201 with presence and the claim window off, the inventory cap kept, and off_for_shards", r.status, r.body)
	}

	r = e.do(nil, "PUT", "/api/v1/rooms/hot", adminKey, `{`+sharded+`,"state":"paused","max_active":2,"admit_rate":20,"interval_ms":100}`)
	var room wire.Room
	if err := json.Unmarshal(r.body, &room); r.status != 201 || err != nil || setting[int64](room.Settings, "shards") != 4 || setting[string](room.Settings, "shard_strategy") != "timestamp" {
		t.Fatalf("PUT a sharded room: %d %s, want 201 with 4 shards, timestamp", r.status, r.body)
	}
	for _, body := range []string{`{"shards":8}`, `{"shard_strategy":"counter"}`} {
		if r := e.do(nil, "PUT", "/api/v1/rooms/hot", adminKey, body); r.status != 400 || r.errorCode(t) != "invalid_request" || !strings.Contains(string(r.body), "fixed") {
			t.Errorf("PUT %s over 4 shards, timestamp: %d %s, want 400 (fixed)", body, r.status, r.body)
		}
	}

	// Three visitors wait in the paused room; opened (a PUT that leaves
	// the layout alone), a step admits the two the cap allows.
	clients := make([]wire.Entry, 3)
	for i := range clients {
		r := e.do(e.client(), "POST", "/api/v1/rooms/hot/entries", "", "")
		if clients[i] = r.entry(t); r.status != 201 || clients[i].State != "waiting" || clients[i].Ticket == "" {
			t.Fatalf("enter #%d into the paused room: %d %s, want 201 waiting with a ticket", i, r.status, r.body)
		}
	}
	e.putRoom("hot", `{"state":"open"}`)
	res, err := e.q.Admit(context.Background(), "hot")
	if err != nil || len(res.Admitted) != 2 {
		t.Fatalf("Admit = %+v, %v; want two admitted", res, err)
	}
	admitted := 0
	for i, c := range clients {
		r := e.do(nil, "GET", "/api/v1/rooms/hot/entries/me", c.Ticket, "")
		switch got := r.entry(t); {
		case r.status != 200:
			t.Errorf("status of #%d: %d %s", i, r.status, r.body)
		case got.State == "admitted" && got.Pass != "":
			admitted++
			if p := e.do(nil, "GET", "/api/v1/rooms/hot/pass", got.Pass, ""); p.status != 200 {
				t.Errorf("pass check of #%d: %d %s", i, p.status, p.body)
			}
		case got.State != "waiting" || got.Position != 1:
			t.Errorf("status of #%d after the step: %s, want admitted or waiting at 1", i, r.body)
		}
	}
	if admitted != 2 {
		t.Errorf("%d visitors hold a pass, want 2", admitted)
	}

	// Closed: newcomers are refused, whichever shard they hash to.
	e.putRoom("hot", `{"state":"closed"}`)
	for i := range 8 {
		if r := e.do(e.client(), "POST", "/api/v1/rooms/hot/entries", "", ""); r.status != 409 || r.errorCode(t) != "room_closed" {
			t.Errorf("enter #%d into the closed room: %d %s, want 409 room_closed", i, r.status, r.body)
		}
	}
	r = e.do(nil, "GET", "/api/v1/rooms/hot", adminKey, "")
	if err := json.Unmarshal(r.body, &room); err != nil || room.Stats.Waiting != 1 || room.Stats.Active != 2 || room.Stats.AdmittedTotal != 2 || setting[int64](room.Settings, "shards") != 4 {
		t.Errorf("GET the room: %s, want 4 shards, 1 waiting, 2 active, 2 admitted", r.body)
	}
}
