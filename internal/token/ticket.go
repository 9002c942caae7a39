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

// Prefixes name the kind and version of an HMAC token. A t2 ticket is a t1
// ticket that also carries the wait forecast when it was issued; a ticket
// without one is still signed as t1, so that older instances parse it.
const (
	ticketPrefix  = "t1."
	ticket2Prefix = "t2."
	visitorPrefix = "v1."
)

// macLen is the length of an encoded HMAC-SHA256.
var macLen = base64.RawURLEncoding.EncodedLen(sha256.Size)

// Ticket proves a place in a room's queue.
type Ticket struct {
	Room, Visitor string
	Seq           int64
	// IssuedAt is kept to the second, or to the millisecond in a ticket
	// with a forecast; parsed as UTC.
	IssuedAt time.Time
	// Wait is the wait forecast when the ticket was issued, WaitLow and
	// WaitHigh its range (whole milliseconds, none negative). All zero: no
	// forecast (a ticket from before forecasts, or for no place in line).
	Wait, WaitLow, WaitHigh time.Duration
}

// forecast reports whether t carries a wait forecast.
func (t Ticket) forecast() bool { return t.Wait != 0 || t.WaitLow != 0 || t.WaitHigh != 0 }

// SignTicket returns t as a ticket signed by the ring's current key: t1
// (issued at whole seconds) without a forecast, t2 with one.
func (k *Keyring) SignTicket(t Ticket) string {
	ky := k.signer()
	st := ky.ticket.get()
	defer ky.ticket.put(st)
	p := st.buf[:0]
	p = binary.AppendUvarint(p, uint64(len(t.Room)))
	p = append(p, t.Room...)
	p = binary.AppendVarint(p, t.Seq)
	prefix := ticketPrefix
	if t.forecast() {
		prefix = ticket2Prefix
		p = binary.AppendVarint(p, t.IssuedAt.UnixMilli())
		for _, d := range []time.Duration{t.Wait, t.WaitLow, t.WaitHigh} {
			p = binary.AppendUvarint(p, uint64(max(0, d.Milliseconds())))
		}
	} else {
		p = binary.AppendVarint(p, t.IssuedAt.Unix())
	}
	p = append(p, t.Visitor...)
	st.buf = p
	return st.seal(prefix, ky.ID, p)
}

// ParseTicket verifies s and that it belongs to room. It returns ErrInvalid,
// ErrWrongRoom, or ErrExpired TicketTTL after the ticket was issued.
func (k *Keyring) ParseTicket(s, room string) (Ticket, error) {
	prefix := ticketPrefix
	if strings.HasPrefix(s, ticket2Prefix) {
		prefix = ticket2Prefix
	}
	ky, body, ok := k.split(s, prefix)
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
	issued := time.Unix(iat, 0)
	var wait [3]time.Duration
	if prefix == ticket2Prefix {
		issued = time.UnixMilli(iat)
		for i := range wait {
			ms, w := binary.Uvarint(p)
			if w <= 0 || ms > uint64(maxWait/time.Millisecond) {
				return Ticket{}, ErrInvalid
			}
			wait[i] = time.Duration(ms) * time.Millisecond
			p = p[w:]
		}
		if wait == [3]time.Duration{} { // signed as t1
			return Ticket{}, ErrInvalid
		}
	}
	if string(r) != room {
		return Ticket{}, ErrWrongRoom
	}
	t := Ticket{Room: room, Visitor: string(p), Seq: seq, IssuedAt: issued.UTC(), Wait: wait[0], WaitLow: wait[1], WaitHigh: wait[2]}
	if !k.now().Before(t.IssuedAt.Add(TicketTTL)) {
		return Ticket{}, ErrExpired
	}
	return t, nil
}

// maxWait bounds a forecast in a ticket (the queue caps its ETAs at a day).
const maxWait = TicketTTL

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
