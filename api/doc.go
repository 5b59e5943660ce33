// Package api is the ledger's contract, written once: every shape that
// crosses a process boundary. The records the projection keeps and the API
// serves (records.go, events.go, kernel.go), the HTTP bodies (wire*.go),
// the error object with every code and the sentinels it matches
// (errors.go), and, in api/evidence, the verifiable log's leaves, proofs,
// checkpoints and bundles. The server (the repository's root module) and
// the Go client (module github.com/mewledger/ledger/client) both import
// it; it imports only the standard library and golang.org/x/mod, so an
// integrator's module graph holds nothing of the server's (a test in
// internal/lint checks it). Its types are plain values: safe to copy, no
// methods with side effects.
package api
