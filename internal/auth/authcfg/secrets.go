package authcfg

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"

	"github.com/nats-io/nkeys"
	"golang.org/x/crypto/bcrypt"
)

// DefaultBcryptCost is the cost HashPassword uses (nats-server's `nats
// server passwd` uses 11 too).
const DefaultBcryptCost = 11

// HashPassword returns the bcrypt hash of a password, for the password
// fields of the configuration.
func HashPassword(password string, cost int) (string, error) {
	if cost == 0 {
		cost = DefaultBcryptCost
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), cost)
	if err != nil {
		return "", fmt.Errorf("authcfg: hash password: %w", err)
	}
	return string(h), nil
}

// NewPassword returns a random password (32 bytes, base64url) and its
// bcrypt hash.
func NewPassword(cost int) (password, hash string, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("authcfg: random password: %w", err)
	}
	password = base64.RawURLEncoding.EncodeToString(b)
	hash, err = HashPassword(password, cost)
	return password, hash, err
}

// NewUserNkey returns a new nkey user key pair: the public key (for the
// nkey fields) and the seed (for the user's client, or seed_file).
func NewUserNkey() (public, seed string, err error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return "", "", fmt.Errorf("authcfg: create nkey: %w", err)
	}
	defer kp.Wipe()
	pub, err := kp.PublicKey()
	if err != nil {
		return "", "", fmt.Errorf("authcfg: create nkey: %w", err)
	}
	s, err := kp.Seed()
	if err != nil {
		return "", "", fmt.Errorf("authcfg: create nkey: %w", err)
	}
	return pub, string(s), nil
}
