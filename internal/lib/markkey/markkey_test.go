package markkey_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/mewledger/ledger/internal/lib/markkey"
)

// TestLoadOrCreate: the first start makes the key file (mode 0600); the
// next loads the same key; a damaged file is an error, never a new key.
func TestLoadOrCreate(t *testing.T) {
	dir := t.TempDir()
	path := markkey.Path(filepath.Join(dir, "data"))
	mk, created, err := markkey.LoadOrCreate(path)
	if err != nil || !created {
		t.Fatalf("first: created %v, %v", created, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
	again, created, err := markkey.LoadOrCreate(path)
	if err != nil || created || again.SealingKeyID() != mk.SealingKeyID() {
		t.Fatalf("second: created %v, key %s (was %s), %v", created, again.SealingKeyID(), mk.SealingKeyID(), err)
	}
	if err := os.WriteFile(path, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := markkey.LoadOrCreate(path); !errors.Is(err, markkey.ErrKeyFile) {
		t.Fatalf("damaged file: %v, want ErrKeyFile", err)
	}
}
