package booking

import (
	"encoding/json"
	"fmt"
)

// EncodeSeatIDs and DecodeSeatIDs keep a seat id list as a JSON array, for
// the SQL stores without array columns (SQLite, MySQL); an empty list
// reads back as nil.
func EncodeSeatIDs(ids []int64) string {
	if len(ids) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(ids) // []int64 always marshals
	return string(b)
}

// DecodeSeatIDs is EncodeSeatIDs' inverse.
func DecodeSeatIDs(s string) ([]int64, error) {
	var ids []int64
	if err := json.Unmarshal([]byte(s), &ids); err != nil {
		return nil, fmt.Errorf("seat_ids %q: %w", s, err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return ids, nil
}
