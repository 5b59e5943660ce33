package ledger_test

import (
	"errors"
	"testing"

	"github.com/mewledger/ledger/ledger"
)

// TestCheckSpaceStar (issue 36): "*" is never a space name.
func TestCheckSpaceStar(t *testing.T) {
	err := ledger.CheckSpace("*")
	var re *ledger.RefusalError
	if !errors.As(err, &re) || re.Field != "space" {
		t.Fatalf("CheckSpace(*): %v, want a refusal naming space", err)
	}
	if err := ledger.CheckSpace("a*b"); err != nil {
		t.Fatalf("CheckSpace(a*b): %v", err)
	}
}
