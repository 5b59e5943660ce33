# The proposal ledger. `make run` starts it; `make test` runs every test (after `make tools`).
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

.PHONY: run build test tools lint fuzz bench peer clean

## run: build bin/ledger and start `ledger serve` with the embedded defaults (data in ./data,
## API on 127.0.0.1:8080). The shell execs the binary, so Ctrl-C reaches `ledger serve` alone,
## it shuts down in order and exits 0, and make reports no error (`go run` would die of the
## signal and make would print `*** [run] Interrupt` or `Error 1`).
run: build
	exec $(BIN) serve

## build: build the binary into bin/ledger. The first build compiles about 530 packages (several
## minutes on a loaded 2-core machine, 1–2 on a quiet one; later builds take seconds): it says so,
## and counts the packages as they compile.
build:
	@echo "building $(BIN): the first build compiles about 530 packages (minutes on a small machine; later builds take seconds)"
	@{ $(NOCGO) $(GO) build -v -buildvcs=auto -o $(BIN) ./cmd/ledger 2>&1; echo "build-exit $$?"; } | \
		awk '/^build-exit /{ if (n) printf "  %d packages compiled\n", n; exit $$2 } \
			/^[A-Za-z0-9._\/~-]+$$/ { n++; if (n % 25 == 0) { printf "  %d packages compiled…\n", n; fflush() }; next } \
			{ print; fflush() }'

## test: every test of every module, with the race detector, never cached. Needs chromium
## (the console's browser tests), zsh and fish (the completion tests) and promtool
## (deploy/observability's rules): `make tools` installs the missing ones first. Every module
## runs even when one fails; each package is reported as it ends, the packages still running
## are named every minute (PROGRESS_EVERY), and the run ends with the modules that failed.
PROGRESS_EVERY ?= 1m
test: tools bin/testprogress
	@failed=""; for m in $(MODULES); do echo "== test $$m"; \
		(cd $$m && $(CURDIR)/bin/testprogress -every $(PROGRESS_EVERY) -name "$$m" -- \
			$(GO) test -json -race -count=1 -timeout $(TEST_TIMEOUT) ./...) || failed="$$failed $$m"; done; \
	if [ -n "$$failed" ]; then echo "make test: FAILED in module(s):$$failed"; exit 1; fi; \
	echo "make test: every module passed ($(MODULES))"

bin/testprogress: internal/tools/testprogress/main.go
	@$(GO) build -o $@ ./internal/tools/testprogress

## tools: the programs the tests need beyond Go, installed with Debian's apt-get when missing
## (chromium for the console's browser tests, zsh and fish for the completion tests, promtool
## from the prometheus package for deploy/observability; a few hundred MB, minutes on a fresh
## machine). Present ones are not installed again. Without root or apt-get it fails with one
## line naming what is missing.
TEST_TOOLS   := chromium zsh fish promtool
tools:
	@missing=""; for c in $(TEST_TOOLS); do command -v $$c >/dev/null 2>&1 || missing="$$missing $$c"; done; \
	[ -z "$$missing" ] && exit 0; \
	pkgs="$$(echo "$$missing" | sed 's/ promtool/ prometheus/')"; \
	if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
		echo "make: the tests need$$missing, not found; install them (Debian/Ubuntu as root: apt-get install$$pkgs) and run make test again"; exit 1; fi; \
	echo "make: installing$$pkgs with apt-get for the tests (missing:$$missing; a few minutes on a fresh machine)"; \
	{ apt-get -o DPkg::Lock::Timeout=600 update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 \
		install -y -qq --no-install-recommends $$pkgs >/dev/null; } || { echo "make: apt-get install$$pkgs failed (see above)"; exit 1; }; \
	for c in $$missing; do command -v $$c >/dev/null 2>&1 || { echo "make: $$c still missing after apt-get install$$pkgs"; exit 1; }; done

STATICCHECK  ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

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
