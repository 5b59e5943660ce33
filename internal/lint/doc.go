// Package lint holds no code: its tests guard the repository's layers, as
// Pebble's internal/lint does. The core packages (api, ledger, projections,
// subjects) never import internal/...; nothing but tests imports
// internal/testkit or net/http/httptest (so the shipped binary links
// neither); the api module links only the standard library and golang.org/x/mod
// (the client module checks its own dependencies).
package lint
