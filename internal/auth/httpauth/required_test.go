package httpauth

import (
	"net/http"
	"slices"
)

// Required wraps next so that it needs a token holding any of roles (at
// least one role must be given), without Protect's route table: the
// tests check g.check through it. It does not rate-limit; see Limit.
func (g *Guard) Required(next http.Handler, roles ...Role) http.Handler {
	if len(roles) == 0 {
		panic("httpauth: Required needs at least one role")
	}
	roles = slices.Clone(roles)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r = g.check(w, r, roles, false, false); r != nil {
			next.ServeHTTP(w, r)
		}
	})
}
