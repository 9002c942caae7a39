package token

import (
	"encoding/binary"
	"time"
)

const challengePrefix = "c1."

// Challenge is a proof-of-work puzzle handed to an anonymous visitor before
// it may take a queue place: find a nonce such that SHA-256(token ":" nonce)
// starts with Bits zero bits. ID makes each challenge single-use (the
// caller remembers used ids until ExpiresAt).
type Challenge struct {
	Room      string
	Bits      int
	ID        string
	ExpiresAt time.Time // kept to the second
}

// SignChallenge returns c as a token signed by the ring's current key.
func (k *Keyring) SignChallenge(c Challenge) string {
	ky := k.signer()
	st := ky.challenge.get()
	defer ky.challenge.put(st)
	p := st.buf[:0]
	p = binary.AppendUvarint(p, uint64(len(c.Room)))
	p = append(p, c.Room...)
	p = binary.AppendUvarint(p, uint64(c.Bits))
	p = binary.AppendVarint(p, c.ExpiresAt.Unix())
	p = append(p, c.ID...)
	st.buf = p
	return st.seal(challengePrefix, ky.ID, p)
}

// ParseChallenge verifies s and that it belongs to room. It returns
// ErrInvalid, ErrWrongRoom, or ErrExpired at or after ExpiresAt.
func (k *Keyring) ParseChallenge(s, room string) (Challenge, error) {
	ky, body, ok := k.split(s, challengePrefix)
	if !ok {
		return Challenge{}, ErrInvalid
	}
	st := ky.challenge.get()
	defer ky.challenge.put(st)
	p, ok := st.open(s, body)
	if !ok {
		return Challenge{}, ErrInvalid
	}
	n, w := binary.Uvarint(p)
	if w <= 0 || n > uint64(len(p)-w) {
		return Challenge{}, ErrInvalid
	}
	r := string(p[w : w+int(n)])
	p = p[w+int(n):]
	bits, w := binary.Uvarint(p)
	if w <= 0 || bits > 256 {
		return Challenge{}, ErrInvalid
	}
	p = p[w:]
	exp, w := binary.Varint(p)
	if w <= 0 || len(p) == w {
		return Challenge{}, ErrInvalid
	}
	if r != room {
		return Challenge{}, ErrWrongRoom
	}
	c := Challenge{Room: r, Bits: int(bits), ExpiresAt: time.Unix(exp, 0).UTC(), ID: string(p[w:])}
	if !k.now().Before(c.ExpiresAt) {
		return Challenge{}, ErrExpired
	}
	return c, nil
}
