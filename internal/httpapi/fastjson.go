package httpapi

import (
	"encoding/json"
	"strconv"
	"time"
)

// AppendJSON appends e as encoding/json would encode it (without the
// trailing newline). Status polls are the hottest path of the server, and
// this is about four times cheaper than reflection; TestEntryResponseJSON
// pins the equivalence.
func (e EntryResponse) AppendJSON(b []byte) []byte {
	b = append(b, `{"room":`...)
	b = appendString(b, e.Room)
	if e.Ticket != "" {
		b = append(b, `,"ticket":`...)
		b = appendString(b, e.Ticket)
	}
	b = append(b, `,"state":`...)
	b = appendString(b, e.State)
	b = append(b, `,"room_state":`...)
	b = appendString(b, e.RoomState)
	b = append(b, `,"position":`...)
	b = strconv.AppendInt(b, e.Position, 10)
	b = append(b, `,"ahead":`...)
	b = strconv.AppendInt(b, e.Ahead, 10)
	b = append(b, `,"eta_seconds":`...)
	b = strconv.AppendInt(b, e.ETASeconds, 10)
	b = append(b, `,"poll_after_ms":`...)
	b = strconv.AppendInt(b, e.PollAfterMS, 10)
	if e.Pass != "" {
		b = append(b, `,"pass":`...)
		b = appendString(b, e.Pass)
	}
	if e.PassExpiresAt != nil {
		b = append(b, `,"pass_expires_at":"`...)
		b = e.PassExpiresAt.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	return append(b, '}')
}

// appendString appends s as a JSON string: directly when it has only
// characters that need no escaping (ids, tokens), else through encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
