module github.com/mewledger/ledger/client

go 1.26.8

require (
	github.com/mewledger/ledger/api v0.1.0
	golang.org/x/mod v0.43.0
)

// The contract lives in this repository (api/); an integrator's go get
// resolves it like any other module.
replace github.com/mewledger/ledger/api => ../api
