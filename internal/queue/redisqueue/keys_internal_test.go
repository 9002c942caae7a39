package redisqueue

import (
	"slices"
	"strconv"
	"testing"
)

// TestKeys checks a room's keys, from the cache as when first built, and
// that rooms named by strangers cannot grow the cache past maxKeyRooms.
func TestKeys(t *testing.T) {
	s := New(nil, "p:")
	want := roomKeys(keysPerCall("p:", "r"))
	for range 2 {
		if got := s.keys("r"); !slices.Equal(got, want) {
			t.Fatalf("keys = %q, want %q", got, want)
		}
	}
	if got := s.keys("r").with(1, "x"); !slices.Equal(got, []string{"p:{r}:meta", "x", "p:{r}:guard"}) {
		t.Errorf("with = %q", got)
	}
	for i := range 3 * maxKeyRooms {
		s.keys("stranger-" + strconv.Itoa(i))
	}
	n := 0
	s.roomKeys.Range(func(any, any) bool { n++; return true })
	if n > maxKeyRooms || s.keyRooms.Load() > maxKeyRooms {
		t.Errorf("the cache holds %d rooms (counted %d), want at most %d", n, s.keyRooms.Load(), maxKeyRooms)
	}
}

// keysPerCall builds a room's keys as every call did before the cache:
// BenchmarkKeys' reference.
func keysPerCall(prefix, room string) []string {
	base := prefix + "{" + room + "}:"
	return []string{base + "meta", base + "wait", base + "active", base + "pre", base + "seen", base + "parked", base + "back", base + "lane", base + "guard"}
}

// sink keeps benchmarked keys on the heap, as a script call's are.
var sink []string

func BenchmarkKeys(b *testing.B) {
	b.Run("cached", func(b *testing.B) {
		s := New(nil, "usher:")
		b.ReportAllocs()
		for range b.N {
			sink = s.keys("schedule-12345")
		}
	})
	b.Run("per-call", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			sink = keysPerCall("usher:", "schedule-12345")
		}
	})
}
