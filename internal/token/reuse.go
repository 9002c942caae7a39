package token

import (
	"sync"
	"time"
)

// ReusePass returns a pass for p and its expiry: one this ring signed
// earlier for the same room and visitor with its current key, while that
// one is no later than p's expiry and has at least half of p's life left
// (the gate renews a pass at half its life too); else SignPass(p), kept
// for the next call. It spares the Ed25519 signature of every answer to an
// admitted visitor's poll. The ring keeps at most passCacheMax passes,
// forgetting expired ones; beyond that it signs without keeping.
func (k *Keyring) ReusePass(p Pass) (string, time.Time, error) {
	now, kid := k.now(), k.signer().ID
	id := p.Room + "\x00" + p.Visitor
	if c, ok := k.passes.get(id); ok && c.kid == kid && !c.exp.After(p.ExpiresAt) && 2*c.exp.Sub(now) >= p.ExpiresAt.Sub(now) {
		return c.pass, c.exp, nil
	}
	s, err := k.SignPass(p)
	if err != nil {
		return "", time.Time{}, err
	}
	k.passes.put(id, cachedPass{pass: s, kid: kid, exp: p.ExpiresAt}, now)
	return s, p.ExpiresAt, nil
}

// CheckPass is ParsePass(raw, room)'s error, from memory when raw was
// verified for room less than checkedFor ago and has not expired since: a
// visitor polling a read-only resource costs one Ed25519 verification a
// minute, not one a poll. A key taken off the ring stops its passes within
// checkedFor.
func (k *Keyring) CheckPass(raw, room string) error {
	now, id := k.now(), room+"\x00"+raw
	if c, ok := k.checked.get(id); ok && now.Before(c.exp) {
		return nil
	}
	p, err := k.ParsePass(raw, room)
	if err != nil {
		return err
	}
	exp := now.Add(checkedFor)
	if p.ExpiresAt.Before(exp) {
		exp = p.ExpiresAt
	}
	k.checked.put(id, cachedPass{exp: exp}, now)
	return nil
}

// checkedFor is how long CheckPass trusts a verification.
const checkedFor = time.Minute

// passCacheMax bounds the passes a ring keeps (about 0.5 KB each).
const passCacheMax = 1 << 16

type cachedPass struct {
	pass, kid string
	exp       time.Time
}

// passCache is ReusePass's memory (room and visitor → the last pass) and
// CheckPass's (room and pass → until when it is trusted).
type passCache struct {
	mu     sync.Mutex
	m      map[string]cachedPass
	pruned time.Time
}

func (c *passCache) get(id string) (cachedPass, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.m[id]
	return p, ok
}

func (c *passCache) put(id string, p cachedPass, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]cachedPass{}
	}
	if len(c.m) >= passCacheMax || now.Sub(c.pruned) >= time.Minute {
		for k, v := range c.m {
			if !v.exp.After(now) {
				delete(c.m, k)
			}
		}
		c.pruned = now
	}
	if _, ok := c.m[id]; ok || len(c.m) < passCacheMax {
		c.m[id] = p
	}
}
