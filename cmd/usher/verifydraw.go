package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"usher/internal/queue"
	"usher/internal/wire"
)

// verifyDraw checks a room's opening draw from the outside: it reads GET
// /api/v1/rooms/{room}/draw and checks that the published seed hashes to
// the commitment (and to the one the caller recorded before the opening),
// and that a list of pre-queue entrants, in the order of the places they
// got (their sequence numbers), follows the draw's order,
// HMAC-SHA256(seed, visitor) ascending.
func verifyDraw(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := newFlags("verify-draw", getenv, stderr)
	f.own("verify-draw")
	room := f.string("room", "", "the room whose draw to check (required)")
	base := f.string("url", "http://127.0.0.1:8080", "usher's base URL (behind usher proxy: https://site/_usher)")
	recorded := f.string("commitment", "", "the commitment recorded before the opening (hex): it must be the one published")
	visitorsFile := f.string("visitors", "", "a file of the pre-queue entrants' visitor ids, one per line, in the order of the places they got (their sequence numbers): it must follow the draw's order")
	timeout := f.duration("timeout", 10*time.Second, "deadline of the request")
	if err := f.parse(args); err != nil {
		return err
	}
	if !queue.ValidRoomID(*room) {
		f.errs = append(f.errs, fmt.Sprintf("--room/%s=%q: want a room id, [a-z0-9][a-z0-9-]{0,63}", f.envName("room"), *room))
	}
	if *recorded != "" && !isCommitment(*recorded) {
		f.errs = append(f.errs, fmt.Sprintf("--commitment/%s: want 64 hex digits", f.envName("commitment")))
	}
	if err := f.check(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	d, err := fetchDraw(ctx, strings.TrimSuffix(*base, "/")+"/api/v1/rooms/"+*room+"/draw")
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "room %s: opening %s, %d entrants, commitment %s\n", d.Room, d.OpensAt.Format(time.RFC3339Nano), d.Entrants, d.Commitment)
	if *recorded != "" && !strings.EqualFold(*recorded, d.Commitment) {
		return fmt.Errorf("the published commitment %s is not the recorded one %s", d.Commitment, *recorded)
	}
	if !d.Drawn {
		fmt.Fprintln(stdout, "not drawn yet: record the commitment and check again after the opening")
		if *visitorsFile != "" {
			return errors.New("--visitors: the draw has not taken place")
		}
		return nil
	}
	seed, err := hex.DecodeString(d.Seed)
	if err != nil || len(seed) != queue.SeedSize {
		return fmt.Errorf("the published seed %q is not %d bytes in hex", d.Seed, queue.SeedSize)
	}
	if queue.Commitment(seed) != d.Commitment {
		return fmt.Errorf("the seed does not match the commitment: SHA-256(seed) = %s", queue.Commitment(seed))
	}
	fmt.Fprintln(stdout, "seed matches the commitment")
	if *visitorsFile == "" {
		return nil
	}
	visitors, err := readLines(*visitorsFile)
	if err != nil {
		return err
	}
	for i := 1; i < len(visitors); i++ {
		prev, cur := queue.DrawKey(seed, visitors[i-1]), queue.DrawKey(seed, visitors[i])
		if bytes.Compare(prev[:], cur[:]) > 0 {
			return fmt.Errorf("%s (line %d) comes before %s (line %d) in the draw: the order does not follow it",
				visitors[i], i+1, visitors[i-1], i)
		}
	}
	fmt.Fprintf(stdout, "%d visitors in draw order\n", len(visitors))
	return nil
}

func isCommitment(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == 32
}

func fetchDraw(ctx context.Context, url string) (wire.Draw, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return wire.Draw{}, fmt.Errorf("bad --url: %w", err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return wire.Draw{}, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return wire.Draw{}, err
	}
	if res.StatusCode != http.StatusOK {
		return wire.Draw{}, fmt.Errorf("GET %s: %s: %s", url, res.Status, bytes.TrimSpace(body))
	}
	var d wire.Draw
	if err := json.Unmarshal(body, &d); err != nil {
		return wire.Draw{}, fmt.Errorf("GET %s: %w", url, err)
	}
	return d, nil
}

// readLines reads the non-empty lines of a file, trimmed.
func readLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	return lines, sc.Err()
}
