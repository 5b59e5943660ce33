module example.com/agent

go 1.26.8

require github.com/mewledger/ledger/client v0.0.0

require (
	github.com/mewledger/ledger/api v0.1.0 // indirect
	golang.org/x/mod v0.43.0 // indirect
)

// This example lives in the ledger's repository; an agent elsewhere drops
// the replaces and runs: go get github.com/mewledger/ledger/client
replace (
	github.com/mewledger/ledger/api => ../../api
	github.com/mewledger/ledger/client => ../../client
)
