package memqueue

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestFIFOAgainstModel runs random pushes, removals, pops and rank lookups
// against a plain slice, with the full hash and with hashes narrowed so that
// most ids clash (mask 0: every id has the same hash).
func TestFIFOAgainstModel(t *testing.T) {
	for _, mask := range []uint64{^uint64(0), 3, 0} {
		t.Run(fmt.Sprintf("mask=%x", mask), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, mask))
			f := newFIFO()
			f.mask = mask
			type entry struct {
				seq int64
				id  string
			}
			var model []entry
			var seq int64
			check := func(id string) {
				t.Helper()
				i := slices.IndexFunc(model, func(e entry) bool { return e.id == id })
				gotSeq, gotPos, ok := f.rank(id)
				if want := i >= 0; ok != want {
					t.Fatalf("rank(%q) found = %v, want %v", id, ok, want)
				}
				if i >= 0 && (gotSeq != model[i].seq || gotPos != int64(i+1)) {
					t.Fatalf("rank(%q) = seq %d position %d, want %d, %d", id, gotSeq, gotPos, model[i].seq, i+1)
				}
			}
			for range 8_000 {
				id := fmt.Sprintf("v%d-%s", rng.IntN(3000), string(make([]byte, rng.IntN(3)*100))) // some ids longer than others
				switch op := rng.IntN(10); {
				case op < 5:
					if !slices.ContainsFunc(model, func(e entry) bool { return e.id == id }) {
						seq++
						f.push(seq, id)
						model = append(model, entry{seq, id})
					}
				case op < 7:
					f.remove(id)
					model = slices.DeleteFunc(model, func(e entry) bool { return e.id == id })
				case op < 8 && len(model) > 0:
					if got := f.pop(); got != model[0].id {
						t.Fatalf("pop = %q, want %q", got, model[0].id)
					}
					model = model[1:]
				}
				check(id)
				if f.len() != int64(len(model)) {
					t.Fatalf("len = %d, want %d", f.len(), len(model))
				}
				if h, ok := f.headSeq(); ok != (len(model) > 0) || ok && h != model[0].seq {
					t.Fatalf("headSeq = %d, %v; want the model's head %v", h, ok, model)
				}
			}
		})
	}
}

// TestIDBlocksReleased: blocks whose ids were all released are dropped, so
// a line that is entered and drained keeps no memory for the gone ids.
func TestIDBlocksReleased(t *testing.T) {
	f := newFIFO()
	long := string(make([]byte, 1000))
	for i := range 1000 {
		f.push(int64(i+1), fmt.Sprint(i, long)) // about 16 blocks
	}
	for range 1000 {
		f.pop()
	}
	kept := 0
	for _, b := range f.blocks.blocks {
		if b != nil {
			kept++
		}
	}
	if n := len(f.blocks.blocks); n < 10 || kept != 1 {
		t.Errorf("after draining: %d of %d blocks kept, want only the current one of more than 10", kept, n)
	}
}
