package memqueue

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"usher/internal/queue"
)

// Open returns a store whose rooms, with their settings and opening draws,
// survive a restart: they are kept in the file at path, which is read now
// and rewritten whole at every change of a room's settings or draw (to a
// temporary file, fsynced, renamed over the old one). Queues, active sets
// and counters are not kept: after a restart visitors enter again, and an
// old ticket gets an exact answer (queue.Queue.Status). A pre-queue entrant
// who enters again before the draw gets the same draw key, so loses nothing.
func Open(path string) (*Store, error) {
	s := New()
	s.disk = &roomFile{path: path, rooms: make(map[string]savedRoom)}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("memqueue: open %s: %w", path, err)
	}
	var f fileFormat
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("memqueue: open %s: %w", path, err)
	}
	for name, saved := range f.Rooms {
		r, err := saved.room()
		if err != nil {
			return nil, fmt.Errorf("memqueue: open %s: room %s: %w", path, name, err)
		}
		r.since = time.Now()
		s.rooms[name] = r
		s.disk.rooms[name] = saved
	}
	return s, nil
}

// fileFormat is the rooms file.
type fileFormat struct {
	Rooms map[string]savedRoom `json:"rooms"`
}

// savedRoom is what survives a restart of one room.
type savedRoom struct {
	// Settings by queue.SettingFields name and encoding; a setting missing
	// (written by an older usher) reads as its default.
	Settings map[string]string `json:"settings"`
	Seed     string            `json:"draw_seed,omitempty"` // hex
	Drawn    bool              `json:"drawn,omitempty"`
	Entrants int64             `json:"draw_entrants,omitempty"`
}

func saved(r *room) savedRoom {
	sr := savedRoom{Settings: make(map[string]string), Seed: hex.EncodeToString(r.draw.Seed), Drawn: r.draw.Done}
	if r.draw.Done {
		sr.Entrants = r.draw.Entrants
	}
	for _, f := range queue.SettingFields() {
		sr.Settings[f.Name] = f.Encode(r.settings)
	}
	return sr
}

func (sr savedRoom) room() (*room, error) {
	set, err := queue.DecodeSettings(sr.Settings)
	if err != nil {
		return nil, err
	}
	if err := set.Validate(); err != nil {
		return nil, err
	}
	seed, err := hex.DecodeString(sr.Seed)
	if err != nil || (len(seed) != 0 && len(seed) != queue.SeedSize) {
		return nil, fmt.Errorf("draw seed: want %d bytes in hex", queue.SeedSize)
	}
	r := newRoom(queue.Settings{State: set.State}) // no OpensAt yet: no new seed
	r.settings, r.tokens = set, float64(set.Batch())
	if len(seed) > 0 {
		r.draw = queue.Draw{Seed: seed, Done: sr.Drawn, Entrants: sr.Entrants}
		if !sr.Drawn {
			r.pre = make(map[string][32]byte)
		}
	}
	r.seed() // OpensAt set by an older usher that kept no seed
	return r, nil
}

// roomFile keeps the rooms file: the last saved state of every room.
type roomFile struct {
	path  string
	mu    sync.Mutex
	rooms map[string]savedRoom
}

// save records room name's settings and draw and rewrites the file; the
// caller holds r.mu (or is alone with r). Without a file it does nothing.
// A failure wraps queue.ErrUnavailable and leaves the file's record of the
// room as it was.
func (s *Store) save(name string, r *room) error {
	sr := saved(r)
	return s.rewrite(name, &sr)
}

// unsave removes room name's record and rewrites the file. Without a file
// it does nothing. A failure wraps queue.ErrUnavailable and keeps the
// record.
func (s *Store) unsave(name string) error { return s.rewrite(name, nil) }

// rewrite sets room name's record to sr (nil: removes it) and rewrites the
// file; on failure the record is restored.
func (s *Store) rewrite(name string, sr *savedRoom) error {
	if s.disk == nil {
		return nil
	}
	d := s.disk
	d.mu.Lock()
	defer d.mu.Unlock()
	prev, had := d.rooms[name]
	if sr == nil && !had {
		return nil
	}
	if sr == nil {
		delete(d.rooms, name)
	} else {
		d.rooms[name] = *sr
	}
	b, err := json.MarshalIndent(fileFormat{Rooms: d.rooms}, "", "  ")
	if err == nil {
		err = writeFile(d.path, b)
	}
	if err != nil {
		if had {
			d.rooms[name] = prev
		} else {
			delete(d.rooms, name)
		}
		return fmt.Errorf("memqueue: save rooms: %w: %v", queue.ErrUnavailable, err)
	}
	return nil
}

// writeFile replaces path with b: a temporary file in the same directory,
// fsynced, renamed over path, and the directory fsynced.
func writeFile(path string, b []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".rooms-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after a successful rename, nothing to remove
	if _, err = f.Write(b); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
