package token

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"time"

	"usher/internal/fault"
)

const invitePrefix = "n1."

// ErrInviteRequired answers an entry without an invite into a presale room.
var ErrInviteRequired = fault.New(fault.InviteRequired, "this room admits visitors with an invite only")

// Invite admits one visitor to a presale room: the visitor entering with it
// is "inv:" + ID, so one invite is one place, from any device, however often
// it is used.
type Invite struct {
	Room      string
	ID        string
	ExpiresAt time.Time // kept to the second
}

// Visitor is the visitor id of the invite's holder: "inv:" + ID.
func (inv Invite) Visitor() string { return "inv:" + inv.ID }

// NewInviteID returns a random invite id: 12 bytes, base64url (16
// characters).
func NewInviteID() string {
	var b [12]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// SignInvite returns inv as a code signed by the ring's current key.
func (k *Keyring) SignInvite(inv Invite) string {
	ky := k.signer()
	st := ky.invite.get()
	defer ky.invite.put(st)
	p := st.buf[:0]
	p = binary.AppendUvarint(p, uint64(len(inv.Room)))
	p = append(p, inv.Room...)
	p = binary.AppendVarint(p, inv.ExpiresAt.Unix())
	p = append(p, inv.ID...)
	st.buf = p
	return st.seal(invitePrefix, ky.ID, p)
}

// ParseInvite verifies s and that it belongs to room. It returns ErrInvalid,
// ErrWrongRoom, or ErrExpired at or after ExpiresAt.
func (k *Keyring) ParseInvite(s, room string) (Invite, error) {
	ky, body, ok := k.split(s, invitePrefix)
	if !ok {
		return Invite{}, ErrInvalid
	}
	st := ky.invite.get()
	defer ky.invite.put(st)
	p, ok := st.open(s, body)
	if !ok {
		return Invite{}, ErrInvalid
	}
	n, w := binary.Uvarint(p)
	if w <= 0 || n > uint64(len(p)-w) {
		return Invite{}, ErrInvalid
	}
	r := string(p[w : w+int(n)])
	p = p[w+int(n):]
	exp, w := binary.Varint(p)
	if w <= 0 || len(p) == w {
		return Invite{}, ErrInvalid
	}
	if r != room {
		return Invite{}, ErrWrongRoom
	}
	inv := Invite{Room: r, ID: string(p[w:]), ExpiresAt: time.Unix(exp, 0).UTC()}
	if !k.now().Before(inv.ExpiresAt) {
		return Invite{}, ErrExpired
	}
	return inv, nil
}
