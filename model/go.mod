module github.com/mewledger/ledger/model

go 1.26.8
