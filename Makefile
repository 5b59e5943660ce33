# The proposal ledger. `make run` starts it; `make test` runs every test.
GO           ?= go
FUZZTIME     ?= 10s
TEST_TIMEOUT ?= 30m
BIN          ?= bin/ledger
# The binary is pure Go: Pebble then keeps its memtables and block cache on
# the Go heap, under the process's soft memory limit (GOMEMLIMIT),
# instead of in C memory through a cgo call per block. Tests keep cgo: the
# race detector needs it.
NOCGO        := CGO_ENABLED=0
# The repository's Go modules (etcd's layout): the server at the root, the
# record types and the Go client on their own, so that an integrator's
# client pulls in none of the server's dependencies. Every target below
# runs in each.
MODULES      := . api client examples/agent

.PHONY: run build test lint fuzz bench peer clean browser shells

## run: build bin/ledger and start `ledger serve` with the embedded defaults (data in ./data,
## API on 127.0.0.1:8080). The shell execs the binary, so Ctrl-C reaches `ledger serve` alone,
## it shuts down in order and exits 0, and make reports no error (`go run` would die of the
## signal and make would print `*** [run] Interrupt` or `Error 1`).
run: build
	exec $(BIN) serve

## build: build the binary into bin/ledger
build:
	$(NOCGO) $(GO) build -buildvcs=auto -o $(BIN) ./cmd/ledger

## test: every test, with the race detector, never cached (installs Debian's
## chromium, zsh and fish first when missing: the console's browser tests and the
## completion tests need them)
test: browser shells
	@set -e; for m in $(MODULES); do echo "== test $$m"; \
		(cd $$m && $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...); done

STATICCHECK  ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

## browser: a headless Chromium for the console's tests (apt-get, when missing)
browser:
	@command -v chromium >/dev/null 2>&1 || { echo "installing chromium for the console's browser tests"; \
		apt-get update -qq && apt-get install -y -qq chromium; }

## shells: zsh and fish for the completion scripts' tests (apt-get, when missing)
shells:
	@command -v zsh >/dev/null 2>&1 && command -v fish >/dev/null 2>&1 || { echo "installing zsh and fish for the completion tests"; \
		apt-get update -qq && apt-get install -y -qq zsh fish; }

## lint: gofmt, go vet and staticcheck, in every module
lint:
	@set -e; for m in $(MODULES); do echo "== lint $$m"; ( cd $$m; \
		unformatted="$$(gofmt -l $$($(GO) list -f '{{.Dir}}' ./...))"; \
		if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi; \
		$(GO) build ./...; \
		$(GO) vet ./...; \
		$(GO) run $(STATICCHECK) ./... ); done

## bench: the performance tables of docs/performance.md (ledger bench; about 15 minutes on 2 cores).
## make bench BENCHFLAGS=--quick is the CI smoke run (under a minute).
bench:
	$(NOCGO) $(GO) run ./cmd/ledger bench $(BENCHFLAGS)

## peer: the ledger against a PostgreSQL table on the same events (internal/bench/peer; needs root
## and PostgreSQL 15's initdb, pg_ctl and psql; about 2 minutes). PEER_EVENTS sets the size.
PEER_EVENTS ?= 100000
peer:
	PROJ=$(CURDIR) bash internal/bench/peer/run.sh $(PEER_EVENTS)

## fuzz: every fuzz target of every module for FUZZTIME each (make fuzz FUZZTIME=30s)
fuzz:
	GO=$(GO) .ci/fuzz $(FUZZTIME)

clean:
	rm -rf bin
