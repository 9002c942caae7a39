package token

import (
	"bytes"
	"cmp"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Labels that domain-separate the HMAC secrets derived from a key's seed.
const (
	ticketLabel    = "usher ticket v1"
	visitorLabel   = "usher visitor v1"
	challengeLabel = "usher challenge v1"
	inviteLabel    = "usher invite v1"
)

// kidBytes is the number of random bytes in a key id (11 base64url characters).
const kidBytes = 8

// Keyring holds Ed25519 signing keys, each with a key id (kid). The newest
// active key signs (the oldest while none is active yet); every key in the
// ring verifies. It is immutable once loaded and safe for concurrent use.
type Keyring struct {
	now  func() time.Time
	keys []*key          // newest first: by created, then by kid
	byID map[string]*key // kid → key
	jwks []byte
	// passes are the passes ReusePass may hand out again.
	passes passCache
	// checked are the passes CheckPass verified lately.
	checked passCache
}

// KeyInfo describes one key of a Keyring.
type KeyInfo struct {
	ID         string
	Created    time.Time
	ActivateAt time.Time
}

type key struct {
	KeyInfo
	priv      ed25519.PrivateKey
	pub       ed25519.PublicKey
	ticket    *macKey
	visitor   *macKey
	challenge *macKey
	invite    *macKey
}

// keyFile is the JSON form of a key, one file <kid>.json per key.
type keyFile struct {
	KID        string    `json:"kid"`
	Created    time.Time `json:"created"`
	ActivateAt time.Time `json:"activate_at"`
	Seed       string    `json:"seed"` // base64url, no padding, 32 bytes
}

// LoadDir loads every key file (<kid>.json) in dir; other files, and names
// that start with a dot, are ignored. A corrupt key file is an error that
// names the file. If dir has no key, LoadDir creates dir (0700) and a first
// key (file 0600) that is active at once. now is the clock of the returned
// Keyring (which key signs, expiry, iat); nil means time.Now.
//
// Limits: the Keyring does not watch dir (load it again to see new keys),
// and instances that each create a first key in an empty directory cannot
// verify each other's tokens.
func LoadDir(dir string, now func() time.Time) (*Keyring, error) {
	if now == nil {
		now = time.Now
	}
	files, err := readKeyFiles(dir)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		t := now()
		kf, err := writeKey(dir, t, t)
		if err != nil {
			return nil, err
		}
		files = append(files, kf)
	}
	return newKeyring(files, now)
}

// Rotate writes a new key into dir (created now, mode 0600) that starts
// signing at activateAt; it verifies at once. It returns the new key's id.
//
// Rotate does not touch loaded Keyrings: each instance sees the key on its
// next LoadDir. Operators stage a key on every instance (copy the file) well
// before activateAt, so that every instance verifies what the first signer
// issues; old keys verify until their file is deleted (retired) and the ring
// reloaded.
func Rotate(dir string, activateAt time.Time) (kid string, err error) {
	kf, err := writeKey(dir, time.Now(), activateAt)
	if err != nil {
		return "", err
	}
	return kf.KID, nil
}

// Keys lists the ring's keys, newest first.
func (k *Keyring) Keys() []KeyInfo {
	out := make([]KeyInfo, len(k.keys))
	for i, ky := range k.keys {
		out[i] = ky.KeyInfo
	}
	return out
}

// JWKS returns the JSON Web Key Set of all keys, newest first:
// {"keys":[{"kty":"OKP","crv":"Ed25519","x":…,"kid":…,"alg":"EdDSA","use":"sig"}]}.
func (k *Keyring) JWKS() []byte { return bytes.Clone(k.jwks) }

// signer returns the key that signs now: the newest key already active, or
// the oldest key when none is active yet.
func (k *Keyring) signer() *key {
	now := k.now()
	for _, ky := range k.keys {
		if !ky.ActivateAt.After(now) {
			return ky
		}
	}
	return k.keys[len(k.keys)-1]
}

func newKeyring(files []keyFile, now func() time.Time) (*Keyring, error) {
	k := &Keyring{now: now, byID: make(map[string]*key, len(files))}
	for _, kf := range files {
		seed, _ := b64.DecodeString(kf.Seed) // checked by parseKeyFile
		priv := ed25519.NewKeyFromSeed(seed)
		ky := &key{
			KeyInfo:   KeyInfo{ID: kf.KID, Created: kf.Created, ActivateAt: kf.ActivateAt},
			priv:      priv,
			pub:       priv.Public().(ed25519.PublicKey),
			ticket:    newMACKey(derive(seed, ticketLabel)),
			visitor:   newMACKey(derive(seed, visitorLabel)),
			challenge: newMACKey(derive(seed, challengeLabel)),
			invite:    newMACKey(derive(seed, inviteLabel)),
		}
		k.keys = append(k.keys, ky)
		k.byID[kf.KID] = ky
	}
	slices.SortFunc(k.keys, func(a, b *key) int {
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	type jwk struct {
		Kty string `json:"kty"`
		Crv string `json:"crv"`
		X   string `json:"x"`
		Kid string `json:"kid"`
		Alg string `json:"alg"`
		Use string `json:"use"`
	}
	set := struct {
		Keys []jwk `json:"keys"`
	}{Keys: make([]jwk, 0, len(k.keys))}
	for _, ky := range k.keys {
		set.Keys = append(set.Keys, jwk{Kty: "OKP", Crv: "Ed25519", X: b64.EncodeToString(ky.pub),
			Kid: ky.ID, Alg: "EdDSA", Use: "sig"})
	}
	var err error
	if k.jwks, err = json.Marshal(set); err != nil {
		return nil, fmt.Errorf("token: jwks: %w", err)
	}
	return k, nil
}

// derive returns HMAC-SHA256(seed, label): a secret for one kind of token.
func derive(seed []byte, label string) []byte {
	h := hmac.New(sha256.New, seed)
	h.Write([]byte(label))
	return h.Sum(nil)
}

// readKeyFiles reads and checks every key file in dir. A missing dir has no
// key files.
func readKeyFiles(dir string) ([]keyFile, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("token: read key dir: %w", err)
	}
	var files []keyFile
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue
		}
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("token: key file %s: %w", path, err)
		}
		kf, err := parseKeyFile(name, data)
		if err != nil {
			return nil, fmt.Errorf("token: key file %s: %w", path, err)
		}
		files = append(files, kf)
	}
	return files, nil
}

func parseKeyFile(name string, data []byte) (keyFile, error) {
	var kf keyFile
	if err := json.Unmarshal(data, &kf); err != nil {
		return kf, fmt.Errorf("not a key: %w", err)
	}
	switch seed, err := b64.DecodeString(kf.Seed); {
	case !validKID(kf.KID):
		return kf, fmt.Errorf("kid %q: want 1 to 32 base64url characters", kf.KID)
	case name != kf.KID+".json":
		return kf, fmt.Errorf("kid %q does not match the file name (want %s.json)", kf.KID, kf.KID)
	case kf.Created.IsZero():
		return kf, errors.New("created missing")
	case kf.ActivateAt.IsZero():
		return kf, errors.New("activate_at missing")
	case err != nil || len(seed) != ed25519.SeedSize:
		return kf, fmt.Errorf("seed: want %d bytes in base64url without padding", ed25519.SeedSize)
	}
	return kf, nil
}

func validKID(kid string) bool {
	if len(kid) == 0 || len(kid) > 32 {
		return false
	}
	for i := 0; i < len(kid); i++ {
		c := kid[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// writeKey creates a new random key in dir (created 0700 if missing) as
// <kid>.json, mode 0600. The file appears whole or not at all.
func writeKey(dir string, created, activateAt time.Time) (keyFile, error) {
	var id [kidBytes]byte
	seed := make([]byte, ed25519.SeedSize)
	rand.Read(id[:])
	rand.Read(seed)
	kf := keyFile{
		KID:        b64.EncodeToString(id[:]),
		Created:    created.UTC(),
		ActivateAt: activateAt.UTC(),
		Seed:       b64.EncodeToString(seed),
	}
	data, err := json.MarshalIndent(kf, "", "  ")
	if err != nil {
		return kf, fmt.Errorf("token: write key: %w", err)
	}
	data = append(data, '\n')
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return kf, fmt.Errorf("token: write key: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".key-*.tmp") // mode 0600; ignored by LoadDir
	if err != nil {
		return kf, fmt.Errorf("token: write key: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, a no-op
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, kf.KID+".json"))
	}
	if err != nil {
		return kf, fmt.Errorf("token: write key %s: %w", kf.KID, err)
	}
	return kf, nil
}
