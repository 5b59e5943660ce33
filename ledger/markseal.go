package ledger

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"
	"sync"
)

// HeaderBridgeSeal is the header the ledger's own append path sets beside
// a HeaderBridge mark (contract §14, "Several recorders": only a recorder
// can speak for itself): "<key id>.<MAC>", an HMAC-SHA256, under a secret
// only the ledger holds (MarkKeys), of the message's subject, its mark
// and its bytes. The fold honours a mark only when its seal verifies, so
// a mark a NATS client published straight onto the stream (the stream
// stores headers as given) moves no recorder's record.
const HeaderBridgeSeal = "Ledger-Bridge-Seal"

// MarkKeySize is the size of a mark sealing key in bytes.
const MarkKeySize = 32

// ErrMarkKey: a mark sealing key is malformed.
var ErrMarkKey = errors.New("ledger: mark key")

// markSealContext separates the seal's MAC from any other use of the key.
const markSealContext = "mewledger bridge mark seal v1\x00"

// MarkKeys are the secrets of the bridge mark seals: the first seals,
// every one verifies (the older keys of a rotation, the keys of the
// ledgers whose logs were imported). A nil *MarkKeys seals nothing and
// verifies nothing. Safe for concurrent use.
type MarkKeys struct {
	keys []markKey
}

type markKey struct {
	id   string // first 4 bytes of SHA-256(key), hex: names the key in a seal
	pool *sync.Pool
}

// NewMarkKeys returns the keys, each MarkKeySize bytes; the first seals.
func NewMarkKeys(keys ...[]byte) (*MarkKeys, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no key", ErrMarkKey)
	}
	mk := &MarkKeys{}
	for i, k := range keys {
		if len(k) != MarkKeySize {
			return nil, fmt.Errorf("%w: key %d is %d bytes, not %d", ErrMarkKey, i+1, len(k), MarkKeySize)
		}
		k := append([]byte(nil), k...)
		sum := sha256.Sum256(k)
		mk.keys = append(mk.keys, markKey{id: hex.EncodeToString(sum[:4]),
			pool: &sync.Pool{New: func() any { return hmac.New(sha256.New, k) }}})
	}
	return mk, nil
}

// ParseMarkKeys reads keys in the key file's format: one key a line, in
// hex (2*MarkKeySize digits); blank lines and lines starting with # are
// skipped. The first key seals.
func ParseMarkKeys(text string) (*MarkKeys, error) {
	var keys [][]byte
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := hex.DecodeString(line)
		if err != nil || len(k) != MarkKeySize {
			return nil, fmt.Errorf("%w: line %d is not a key (%d hex digits)", ErrMarkKey, i+1, 2*MarkKeySize)
		}
		keys = append(keys, k)
	}
	return NewMarkKeys(keys...)
}

// SealingKeyID names the key that seals (in a seal's first part).
func (mk *MarkKeys) SealingKeyID() string {
	if mk == nil {
		return ""
	}
	return mk.keys[0].id
}

func (k *markKey) mac(subject, mark string, raw []byte) []byte {
	h := k.pool.Get().(hash.Hash)
	h.Reset()
	h.Write([]byte(markSealContext))
	h.Write([]byte(subject))
	h.Write([]byte{0})
	h.Write([]byte(mark))
	h.Write([]byte{0})
	h.Write(raw)
	sum := h.Sum(nil)
	k.pool.Put(h)
	return sum
}

// Seal returns the HeaderBridgeSeal value of a message stored under
// subject with bytes raw and HeaderBridge value mark; "" when mk is nil or
// mark is "".
func (mk *MarkKeys) Seal(subject, mark string, raw []byte) string {
	if mk == nil || mark == "" {
		return ""
	}
	k := &mk.keys[0]
	return k.id + "." + base64.RawURLEncoding.EncodeToString(k.mac(subject, mark, raw))
}

// Verify says whether seal is a seal of (subject, mark, raw) under one of
// the keys. False when mk is nil.
func (mk *MarkKeys) Verify(subject, mark string, raw []byte, seal string) bool {
	if mk == nil || mark == "" {
		return false
	}
	id, b64, ok := strings.Cut(seal, ".")
	if !ok {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(b64)
	if err != nil || len(got) != sha256.Size {
		return false
	}
	for i := range mk.keys {
		if k := &mk.keys[i]; k.id == id && hmac.Equal(k.mac(subject, mark, raw), got) {
			return true
		}
	}
	return false
}
