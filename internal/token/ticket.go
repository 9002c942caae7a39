package token

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"hash"
	"strings"
	"sync"
	"time"
)

// Prefixes name the kind and version of an HMAC token.
const (
	ticketPrefix  = "t1."
	visitorPrefix = "v1."
)

// macLen is the length of an encoded HMAC-SHA256.
var macLen = base64.RawURLEncoding.EncodedLen(sha256.Size)

// Ticket proves a place in a room's queue.
type Ticket struct {
	Room, Visitor string
	Seq           int64
	IssuedAt      time.Time // kept to the second; parsed as UTC
}

// SignTicket returns t as a ticket signed by the ring's current key.
func (k *Keyring) SignTicket(t Ticket) string {
	ky := k.signer()
	st := ky.ticket.get()
	defer ky.ticket.put(st)
	p := st.buf[:0]
	p = binary.AppendUvarint(p, uint64(len(t.Room)))
	p = append(p, t.Room...)
	p = binary.AppendVarint(p, t.Seq)
	p = binary.AppendVarint(p, t.IssuedAt.Unix())
	p = append(p, t.Visitor...)
	st.buf = p
	return st.seal(ticketPrefix, ky.ID, p)
}

// ParseTicket verifies s and that it belongs to room. It returns ErrInvalid,
// ErrWrongRoom, or ErrExpired TicketTTL after the ticket was issued.
func (k *Keyring) ParseTicket(s, room string) (Ticket, error) {
	ky, body, ok := k.split(s, ticketPrefix)
	if !ok {
		return Ticket{}, ErrInvalid
	}
	st := ky.ticket.get()
	defer ky.ticket.put(st)
	p, ok := st.open(s, body)
	if !ok {
		return Ticket{}, ErrInvalid
	}
	n, w := binary.Uvarint(p)
	if w <= 0 || n > uint64(len(p)-w) {
		return Ticket{}, ErrInvalid
	}
	r := p[w : w+int(n)]
	p = p[w+int(n):]
	seq, w := binary.Varint(p)
	if w <= 0 {
		return Ticket{}, ErrInvalid
	}
	p = p[w:]
	iat, w := binary.Varint(p)
	if w <= 0 {
		return Ticket{}, ErrInvalid
	}
	p = p[w:]
	if string(r) != room {
		return Ticket{}, ErrWrongRoom
	}
	t := Ticket{Room: room, Visitor: string(p), Seq: seq, IssuedAt: time.Unix(iat, 0).UTC()}
	if !k.now().Before(t.IssuedAt.Add(TicketTTL)) {
		return Ticket{}, ErrExpired
	}
	return t, nil
}

// NewVisitorID returns a random anonymous visitor id: 16 bytes from
// crypto/rand, base64url without padding (22 characters).
func NewVisitorID() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// SignVisitor returns the value of the signed anonymous-visitor cookie for id.
// The cookie does not expire; the HTTP layer sets its Max-Age.
func (k *Keyring) SignVisitor(id string) string {
	ky := k.signer()
	st := ky.visitor.get()
	defer ky.visitor.put(st)
	st.buf = append(st.buf[:0], id...)
	return st.seal(visitorPrefix, ky.ID, st.buf)
}

// ParseVisitor verifies a visitor cookie and returns the visitor id, or
// ErrInvalid. A cookie for an empty id never verifies.
func (k *Keyring) ParseVisitor(s string) (string, error) {
	ky, body, ok := k.split(s, visitorPrefix)
	if !ok {
		return "", ErrInvalid
	}
	st := ky.visitor.get()
	defer ky.visitor.put(st)
	p, ok := st.open(s, body)
	if !ok || len(p) == 0 {
		return "", ErrInvalid
	}
	return string(p), nil
}

// split checks the shape prefix<kid>.<body>.<mac> of s and returns the key
// named by kid and body (still encoded).
func (k *Keyring) split(s, prefix string) (ky *key, body string, ok bool) {
	if len(s) > MaxTokenLen || len(s) < len(prefix)+macLen+2 || !strings.HasPrefix(s, prefix) {
		return nil, "", false
	}
	rest := s[len(prefix) : len(s)-macLen-1]
	if s[len(s)-macLen-1] != '.' {
		return nil, "", false
	}
	kid, body, ok := strings.Cut(rest, ".")
	if !ok {
		return nil, "", false
	}
	ky = k.byID[kid]
	return ky, body, ky != nil
}

// macKey computes one HMAC-SHA256 secret's MACs, reusing hash states.
type macKey struct{ pool sync.Pool }

// macState is the scratch space of one MAC computation.
type macState struct {
	h   hash.Hash
	sum [sha256.Size]byte
	got [sha256.Size]byte
	buf []byte // payload being signed, or decoded payload
	txt []byte // signed text
}

func newMACKey(secret []byte) *macKey {
	m := &macKey{}
	m.pool.New = func() any {
		return &macState{h: hmac.New(sha256.New, secret), buf: make([]byte, 0, 256), txt: make([]byte, 0, 512)}
	}
	return m
}

func (m *macKey) get() *macState { return m.pool.Get().(*macState) }

func (m *macKey) put(st *macState) {
	if cap(st.buf) > MaxTokenLen || cap(st.txt) > 2*MaxTokenLen {
		return // let an oversized buffer go
	}
	m.pool.Put(st)
}

// seal returns prefix kid "." base64url(payload) "." base64url(mac).
func (st *macState) seal(prefix, kid string, payload []byte) string {
	b := st.txt[:0]
	b = append(b, prefix...)
	b = append(b, kid...)
	b = append(b, '.')
	b = b64.AppendEncode(b, payload)
	st.h.Reset()
	st.h.Write(b)
	mac := st.h.Sum(st.sum[:0])
	b = append(b, '.')
	b = b64.AppendEncode(b, mac)
	st.txt = b
	return string(b)
}

// open checks the MAC at the end of s (its shape checked by split) and
// returns body decoded. The result aliases st.buf.
func (st *macState) open(s, body string) ([]byte, bool) {
	signed := s[:len(s)-macLen-1]
	st.txt = append(st.txt[:0], s...)
	if n, err := b64.Decode(st.got[:], st.txt[len(signed)+1:]); err != nil || n != sha256.Size {
		return nil, false
	}
	st.h.Reset()
	st.h.Write(st.txt[:len(signed)])
	if !hmac.Equal(st.h.Sum(st.sum[:0]), st.got[:]) {
		return nil, false
	}
	enc := st.txt[len(signed)-len(body) : len(signed)]
	need := b64.DecodedLen(len(enc))
	if cap(st.buf) < need {
		st.buf = make([]byte, need)
	}
	n, err := b64.Decode(st.buf[:need], enc)
	if err != nil {
		return nil, false
	}
	return st.buf[:n], true
}
