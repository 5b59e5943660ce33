module github.com/mewledger/ledger/api

go 1.26.8

require (
	github.com/transparency-dev/formats v0.1.1
	github.com/transparency-dev/merkle v0.0.2
	golang.org/x/mod v0.43.0
)
