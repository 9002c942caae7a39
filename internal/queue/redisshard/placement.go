package redisshard

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"usher/internal/redisscript"
)

// TagsFor returns the tags (Settings.Tags) of room with the given shards:
// those its home hash holds when the room exists (a room made before tags
// were chosen holds none: ""), else new ones (PlaceTags). The caller
// passes them to put_room, which refuses tags that differ from a room's.
func (s *Store) TagsFor(ctx context.Context, room string, shards int) (string, error) {
	if shards <= 1 {
		return "", nil
	}
	v, err := s.c.Do(ctx, s.c.B().Hmget().Key(s.homeKeys(room)[0]).Field("max_active", "shard_tags").Build()).ToArray()
	if err != nil || len(v) < 2 {
		return "", unavailable("tags", room, fmt.Errorf("reply %v: %v", v, err))
	}
	if _, err := v[0].ToString(); err == nil { // the room exists
		tags, _ := v[1].ToString()
		return tags, nil
	}
	return s.PlaceTags(ctx, room, shards)
}

// PlaceTags chooses the tags of a new room's line shards 1 to shards-1 so
// that a Redis Cluster keeps them on distinct primaries, in turn from the
// home shard's (several shards a primary only when there are more shards
// than primaries), as CLUSTER SLOTS shows them now. On a single server,
// which has no slots, it returns "" (the shard numbers). A cluster
// resharded later moves the slots, not the choice.
func (s *Store) PlaceTags(ctx context.Context, room string, shards int) (string, error) {
	owners, err := redisscript.SlotOwners(ctx, s.c)
	if err != nil {
		return "", unavailable("place tags", room, err)
	}
	if owners == nil {
		return "", nil
	}
	primaries := slices.Compact(slices.Sorted(func(yield func(string) bool) {
		for _, o := range owners {
			if o != "" && !yield(o) {
				return
			}
		}
	}))
	home := slices.Index(primaries, owners[KeySlot(s.homeKeys(room)[0])])
	if home < 0 || len(primaries) < 2 {
		return "", nil
	}
	names := make([]string, 0, shards-1)
	used := map[string]bool{}
	for i := 1; i < shards; i++ {
		want := primaries[(home+i)%len(primaries)]
		name := strconv.Itoa(i) // if no name within the search lands on want
		for n := 1; n <= maxTagSearch; n++ {
			c := strconv.Itoa(n)
			if !used[c] && owners[KeySlot(s.shardTag(room, c))] == want {
				name = c
				break
			}
		}
		used[name] = true
		names = append(names, name)
	}
	return strings.Join(names, ","), nil
}

// maxTagSearch bounds the names PlaceTags tries for a shard: each lands on
// a given primary of P with chance about 1/P.
const maxTagSearch = 4096

// KeySlot is the Redis Cluster slot of key: CRC16 (XMODEM) of its hash
// tag, the part between its first { and the next }, when that is not
// empty, else of the whole key, mod 16384.
func KeySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) & (1<<14 - 1)
}
