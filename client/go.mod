module github.com/mewledger/ledger/client

go 1.26.8

require (
	github.com/mewledger/ledger/model v0.0.0
	github.com/transparency-dev/formats v0.1.1
	github.com/transparency-dev/merkle v0.0.2
	golang.org/x/mod v0.43.0
)

// The model lives in this repository (model/); an integrator's go get
// resolves it like any other module.
replace github.com/mewledger/ledger/model => ../model
