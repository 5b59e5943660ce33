package httpauth_test

import (
	"errors"
	"testing"

	"github.com/mewledger/ledger/internal/auth/httpauth"
)

// TestStarIsNotATokenSpace (issue 36): a token scoped to the space "*"
// is refused in the auth file (it read every space through
// /v1/events?space=*), and a scoped token never may "*": only an
// unscoped token reads every space.
func TestStarIsNotATokenSpace(t *testing.T) {
	_, err := httpauth.New(httpauth.Config{Tokens: []httpauth.Token{
		{Name: "star", SHA256: httpauth.HashToken("star-token-secret"), Roles: []httpauth.Role{httpauth.RoleAuditor}, Spaces: []string{"*"}},
	}, DefaultSpace: "default"})
	if !errors.Is(err, httpauth.ErrConfig) {
		t.Fatalf("a token scoped to \"*\": %v, want ErrConfig", err)
	}
	scoped := httpauth.Principal{Name: "a", Spaces: []string{"a", "*"}}
	if scoped.MaySpace("*") {
		t.Fatal("a scoped token may \"*\"")
	}
	if !scoped.MaySpace("a") || !(httpauth.Principal{Name: "all"}).MaySpace("*") {
		t.Fatal("MaySpace refuses what it should allow")
	}
}
