package deploy_test

import (
	"os"
	"testing"
)

// TestMain removes the ledger binary the help checks built (ledgerHelp).
func TestMain(m *testing.M) {
	code := m.Run()
	if ledgerBin != "" {
		_ = os.Remove(ledgerBin)
	}
	os.Exit(code)
}
