// Command trivialjson is the reference for usher's HTTP benchmarks: the
// cheapest useful net/http JSON handler, answering a fixed object the size
// of a status poll. scripts/bench-http.sh measures usher against it.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net/http"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18090", "listen address")
	flag.Parse()
	type status struct {
		Room        string `json:"room"`
		State       string `json:"state"`
		RoomState   string `json:"room_state"`
		Position    int64  `json:"position"`
		Ahead       int64  `json:"ahead"`
		ETASeconds  int64  `json:"eta_seconds"`
		PollAfterMS int64  `json:"poll_after_ms"`
	}
	http.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(status{"sale", "waiting", "open", 1500, 1499, 36, 3600})
	})
	log.Fatal(http.ListenAndServe(*addr, nil))
}
