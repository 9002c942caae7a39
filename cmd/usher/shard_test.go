package main

import (
	"fmt"
	"testing"

	"usher/internal/testenv"
)

// TestServeShardedRoom runs two `usher serve` on one Redis, and on the
// cluster of USHER_TEST_REDIS_CLUSTER, makes a room of three shards
// through one of them, queues visitors through both, and lets their two
// schedulers admit: everyone gets a pass in turn, and the room never holds
// more than max_active. The second instance learns that the room is
// sharded from the store.
func TestServeShardedRoom(t *testing.T) {
	t.Parallel()
	for _, target := range []struct{ name, env string }{{"redis", "USHER_TEST_REDIS"}, {"cluster", "USHER_TEST_REDIS_CLUSTER"}} {
		t.Run(target.name, func(t *testing.T) {
			t.Parallel()
			url := testenv.URL(t, target.env)
			prefix := testenv.RedisPrefix(t, testenv.RedisAt(t, target.env))
			keys := t.TempDir()
			const admin = "sharded-room-admin-key-0123456789"
			var bases []string
			for range 2 { // one after the other: the first writes the keys
				bases = append(bases, startServe(t, nil, "--addr", "127.0.0.1:0", "--store", url, "--redis-prefix", prefix,
					"--keys-dir", keys, "--admin-key", admin, "--data-dir", testenv.DataDir(t)))
			}
			a, b := client{t, bases[0]}, client{t, bases[1]}
			if st, _, body := a.admin().do("PUT", "/api/v1/rooms/hot", admin, `{"shards":3,"shard_strategy":"timestamp",`+
				`"presence_timeout_seconds":0,"claim_window_seconds":60,"active_ttl_seconds":60,`+
				`"state":"paused","max_active":3,"admit_rate":20,"interval_ms":50}`); st != 201 || body["shards"] != 3.0 {
				t.Fatalf("create a sharded room: %d %v", st, body)
			}
			tickets := make([]string, 9)
			for i := range tickets {
				c := []client{a, b}[i%2]
				st, _, body := c.do("POST", "/api/v1/rooms/hot/entries", admin, fmt.Sprintf(`{"visitor_id":"u%d"}`, i))
				if st != 201 || body["state"] != "waiting" {
					t.Fatalf("enter u%d into the paused room: %d %v", i, st, body)
				}
				tickets[i] = body["ticket"].(string)
			}
			if st, _, body := b.admin().do("PUT", "/api/v1/rooms/hot", admin, `{"state":"open"}`); st != 200 || body["shards"] != 3.0 {
				t.Fatalf("open the room: %d %v", st, body)
			}
			// Three at a time: each admitted visitor leaves, freeing a slot.
			done := map[int]bool{}
			waitFor(t, "everyone admitted in turn", func() bool {
				_, _, room := a.admin().do("GET", "/api/v1/rooms/hot", admin, "")
				if stats, _ := room["stats"].(map[string]any); stats == nil || stats["active"].(float64) > 3 {
					t.Fatalf("room %v: want at most 3 active", room)
				}
				for i, tk := range tickets {
					if done[i] {
						continue
					}
					_, _, body := []client{a, b}[i%2].do("GET", "/api/v1/rooms/hot/entries/me", tk, "")
					if body["state"] != "admitted" {
						continue
					}
					pass := body["pass"].(string)
					if st, _, _ := a.do("GET", "/api/v1/rooms/hot/pass", pass, ""); st != 200 {
						t.Fatalf("pass of u%d: %d", i, st)
					}
					if st, _, _ := b.do("DELETE", "/api/v1/rooms/hot/entries/me", pass, ""); st != 204 {
						t.Fatalf("u%d leaves: %d", i, st)
					}
					done[i] = true
				}
				return len(done) == len(tickets)
			})
			_, _, room := b.admin().do("GET", "/api/v1/rooms/hot", admin, "")
			if stats := room["stats"].(map[string]any); stats["admitted_total"] != 9.0 || stats["waiting"] != 0.0 {
				t.Errorf("room after the sale: %v, want 9 admitted, none waiting", stats)
			}
		})
	}
}
