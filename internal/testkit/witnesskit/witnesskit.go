// Package witnesskit runs the real C2SP witness litewitness
// (filippo.io/torchwood v0.6.1 cmd/litewitness) for tests: it builds the
// binary from the module proxy into the test's temporary directory,
// serves its Ed25519 key from an ssh-agent of its own, writes the log's
// origin and verifier key into its sqlite database, and starts it on a
// loopback port (internal/lib/litewitness, which `ledger bench --only
// witness` uses too). A test that cannot build or start it fails: it is
// never skipped.
package witnesskit

import (
	"testing"

	"github.com/mewledger/ledger/internal/lib/litewitness"
)

// The witness built: litewitness of filippo.io/torchwood at this version.
const (
	Litewitness        = litewitness.Litewitness
	LitewitnessVersion = litewitness.LitewitnessVersion
)

// Witness is one running litewitness.
type Witness = litewitness.Witness

// Build builds litewitness and witnessdb into dir and returns their paths.
func Build(t testing.TB, dir string) (string, string) { t.Helper(); return litewitness.Build(t, dir) }

// Start builds and starts a litewitness named name that witnesses the
// log origin signed by logVKey. It is stopped at the test's end.
func Start(t testing.TB, name, origin, logVKey string) *Witness {
	t.Helper()
	return litewitness.Start(t, name, origin, logVKey)
}

// NewKey returns the cosignature/v1 verifier key of a new witness key
// named name (a witness that cosigns nothing).
func NewKey(t testing.TB, name string) string { return litewitness.NewKey(t, name) }
