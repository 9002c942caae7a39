package queue_test

import (
	"regexp"
	"strings"
	"testing"

	"usher/internal/queue"
)

// roomIDPattern is the grammar ValidRoomID implements by hand.
var roomIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)

func TestValidRoomIDIsThePattern(t *testing.T) {
	ids := []string{"", "a", "-", "a-", "-a", "sale", "schedule-1", "Sale", "sale_1", "sale 1", "é", "a\x00",
		strings.Repeat("a", 64), strings.Repeat("a", 65), "0", "9-9", "a.b", "a/b", "{a}"}
	for c := range 256 {
		ids = append(ids, "x"+string(rune(c)), string([]byte{byte(c)}))
	}
	for _, id := range ids {
		if got, want := queue.ValidRoomID(id), roomIDPattern.MatchString(id); got != want {
			t.Errorf("ValidRoomID(%q) = %v, the pattern says %v", id, got, want)
		}
	}
}

func FuzzValidRoomID(f *testing.F) {
	f.Add("schedule-1")
	f.Add("-a")
	f.Fuzz(func(t *testing.T, id string) {
		if got, want := queue.ValidRoomID(id), roomIDPattern.MatchString(id); got != want {
			t.Errorf("ValidRoomID(%q) = %v, the pattern says %v", id, got, want)
		}
	})
}

// BenchmarkValidRoomID: the hand-written check against the regexp it
// replaced, on a typical id (every API call checks one).
func BenchmarkValidRoomID(b *testing.B) {
	const id = "schedule-12345"
	b.Run("loop", func(b *testing.B) {
		for range b.N {
			queue.ValidRoomID(id)
		}
	})
	b.Run("regexp", func(b *testing.B) {
		for range b.N {
			roomIDPattern.MatchString(id)
		}
	})
}
