// Package markkey keeps the secret of the bridge mark seals
// (ledger.MarkKeys, contract §14) in the data directory: the file
// <data>/bridge-mark.key, made on first start (mode 0600), one key a line
// in hex, the first sealing and every one verifying. Backups of the data
// directory must keep it: without it, a rebuild honours no mark stored
// before (the recorders' records and coverage are lost, the log is not).
package markkey

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mewledger/ledger/ledger"
)

// FileName is the key file's name in the data directory.
const FileName = "bridge-mark.key"

// ErrKeyFile: the key file cannot be read, made or parsed.
var ErrKeyFile = errors.New("markkey: key file")

// Path returns the key file of a data directory.
func Path(dataDir string) string { return filepath.Join(dataDir, FileName) }

// Load reads the keys of the file at path.
func Load(path string) (*ledger.MarkKeys, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	mk, err := ledger.ParseMarkKeys(string(b))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrKeyFile, path, err)
	}
	return mk, nil
}

// LoadOrCreate reads the keys of the file at path, or, when it does not
// exist, makes a new random key there (mode 0600, its directory 0700).
// created says whether it did.
func LoadOrCreate(path string) (mk *ledger.MarkKeys, created bool, err error) {
	mk, err = Load(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return mk, false, err
	}
	k := make([]byte, ledger.MarkKeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	text := "# bridge mark seal keys (contract §14): the first seals, every one verifies; keep with the data\n" +
		hex.EncodeToString(k) + "\n"
	if _, err := f.WriteString(text); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return nil, false, fmt.Errorf("%w: write %s: %w", ErrKeyFile, path, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return nil, false, fmt.Errorf("%w: sync %s: %w", ErrKeyFile, path, err)
	}
	if err := f.Close(); err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	mk, err = ledger.NewMarkKeys(k)
	return mk, err == nil, err
}
