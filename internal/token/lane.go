package token

import (
	"encoding/binary"
	"time"
)

const lanePrefix = "p1."

// LaneCode puts its holders in a room's priority lane (queue.EnterLane):
// up to Uses visitors, each as itself (its own cookie or account), until
// ExpiresAt. The store counts the uses under ID; the signature only says
// the code is genuine.
type LaneCode struct {
	Room      string
	ID        string
	Uses      int64
	ExpiresAt time.Time // kept to the second
}

// SignLaneCode returns c as a code signed by the ring's current key (with
// the invites' secret: the prefix, which the MAC covers, tells them
// apart).
func (k *Keyring) SignLaneCode(c LaneCode) string {
	ky := k.signer()
	st := ky.invite.get()
	defer ky.invite.put(st)
	p := st.buf[:0]
	p = binary.AppendUvarint(p, uint64(len(c.Room)))
	p = append(p, c.Room...)
	p = binary.AppendVarint(p, c.ExpiresAt.Unix())
	p = binary.AppendUvarint(p, uint64(c.Uses))
	p = append(p, c.ID...)
	st.buf = p
	return st.seal(lanePrefix, ky.ID, p)
}

// ParseLaneCode verifies s and that it belongs to room. It returns
// ErrInvalid, ErrWrongRoom, or ErrExpired at or after ExpiresAt.
func (k *Keyring) ParseLaneCode(s, room string) (LaneCode, error) {
	ky, body, ok := k.split(s, lanePrefix)
	if !ok {
		return LaneCode{}, ErrInvalid
	}
	st := ky.invite.get()
	defer ky.invite.put(st)
	p, ok := st.open(s, body)
	if !ok {
		return LaneCode{}, ErrInvalid
	}
	n, w := binary.Uvarint(p)
	if w <= 0 || n > uint64(len(p)-w) {
		return LaneCode{}, ErrInvalid
	}
	r := string(p[w : w+int(n)])
	p = p[w+int(n):]
	exp, w := binary.Varint(p)
	if w <= 0 {
		return LaneCode{}, ErrInvalid
	}
	p = p[w:]
	uses, w := binary.Uvarint(p)
	if w <= 0 || len(p) == w || uses < 1 || uses > 1<<31 {
		return LaneCode{}, ErrInvalid
	}
	if r != room {
		return LaneCode{}, ErrWrongRoom
	}
	c := LaneCode{Room: r, ID: string(p[w:]), Uses: int64(uses), ExpiresAt: time.Unix(exp, 0).UTC()}
	if !k.now().Before(c.ExpiresAt) {
		return LaneCode{}, ErrExpired
	}
	return c, nil
}
