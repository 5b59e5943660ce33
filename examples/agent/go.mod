module example.com/agent

go 1.26.8

require github.com/mewledger/ledger v0.0.0

// This example lives in the ledger's repository; an agent elsewhere drops
// the replace and runs: go get github.com/mewledger/ledger/client
replace github.com/mewledger/ledger => ../..
