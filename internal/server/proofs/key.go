package proofs

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/mewledger/ledger/api/evidence"
)

// KeyFile is the signing key's file name in the data directory.
const KeyFile = "checkpoint.key"

// ErrKeyFile is wrapped by errors about the signing key's file.
var ErrKeyFile = errors.New("proofs: checkpoint key")

// DefaultOrigin returns the origin a new key gets when none is configured:
// "<host name>/ledger" (a C2SP origin is a schema-less URL-like name; the
// host name keeps two ledgers' logs apart). Characters a note key name
// cannot hold (space, '+') become '-'.
func DefaultOrigin() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	host = strings.Map(func(r rune) rune {
		if r == ' ' || r == '+' || r < 0x20 {
			return '-'
		}
		return r
	}, host)
	return host + "/ledger"
}

// LoadKey reads the signer key in path (a C2SP signed-note private key,
// the file GenerateKeyFile writes). The file must not be readable by
// group or others. When origin is not "", the key's name must be it.
func LoadKey(path, origin string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%w: %s is readable by others (mode %04o): chmod 600 it", ErrKeyFile, path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	skey := strings.TrimSpace(string(b))
	s, err := evidence.NewSigner(skey)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrKeyFile, path, err)
	}
	if origin != "" && s.Name() != origin {
		return "", fmt.Errorf("%w: %s signs for origin %q, not %q (the origin is the key's name: keep the key's, or use another key file)", ErrKeyFile, path, s.Name(), origin)
	}
	return skey, nil
}

// GenerateKeyFile makes a new signing key for origin (DefaultOrigin when
// "") and writes it to path, mode 0600, failing if the file exists.
func GenerateKeyFile(path, origin string) (string, error) {
	if origin == "" {
		origin = DefaultOrigin()
	}
	skey, _, err := evidence.GenerateKey(rand.Reader, origin)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	if _, err := f.WriteString(skey + "\n"); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return "", fmt.Errorf("%w: write %s: %w", ErrKeyFile, path, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("%w: sync %s: %w", ErrKeyFile, path, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	return skey, nil
}

// LoadOrGenerateKey loads the key in path, or, when the file does not
// exist and generate is set, makes one (GenerateKeyFile). created says
// whether it did.
func LoadOrGenerateKey(path, origin string, generate bool) (skey string, created bool, err error) {
	skey, err = LoadKey(path, origin)
	if err == nil || !generate || !errors.Is(err, fs.ErrNotExist) {
		return skey, false, err
	}
	skey, err = GenerateKeyFile(path, origin)
	return skey, err == nil, err
}
