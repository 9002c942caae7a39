// Command trivialjson is the reference for usher's HTTP benchmarks: the
// cheapest useful net/http JSON handler, answering a fixed object the size
// of a status poll, on an http.Server with usher serve's timeouts.
// scripts/bench-http.sh measures usher against it.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net/http"
	"time"

	"usher/internal/wire"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18090", "listen address")
	flag.Parse()
	status := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(wire.Entry{Room: "sale", State: "waiting", RoomState: "open", Position: 1500, Ahead: 1499, ETASeconds: 36, PollAfterMS: 3600})
	}
	http.HandleFunc("GET /status", status)
	http.HandleFunc("GET /in/status", status) // scripts/bench-edge.sh's admitted visitor
	// The same server settings as usher serve, so that only the handlers differ.
	srv := &http.Server{
		Addr:              *addr,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	log.Fatal(srv.ListenAndServe())
}
