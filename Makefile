# rsql: `make run` builds and starts the embedded default; `make test` runs every test and
# every fuzz target briefly (scripts/fuzz.sh; `make fuzz` runs them longer). `make pgdiff`
# runs the query-level differential test against PostgreSQL with 500 random queries
# (RSQL_PGDIFF_N, RSQL_PGDIFF_SEED; tests/pgdiff_test.go).
export PATH := $(PATH):/usr/local/go/bin
GO ?= go

.PHONY: deps test-deps build run test bench fuzz pgdiff

deps:
	@bash scripts/deps.sh build

test-deps:
	@bash scripts/deps.sh test

build: deps
	$(GO) build -o bin/rsql ./cmd/rsql

run: build
	./bin/rsql

test: test-deps build
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 30m ./...
	bash scripts/fuzz.sh

bench: build
	$(GO) test -run '^$$' -bench . -benchmem ./exec/ ./broker/

fuzz:
	FUZZTIME=$${FUZZTIME:-20s} bash scripts/fuzz.sh

pgdiff: test-deps build
	RSQL_BIN=$(CURDIR)/bin/rsql RSQL_PGDIFF_N=$${RSQL_PGDIFF_N:-500} $(GO) test -count=1 -timeout 60m -run 'TestPGDiff' -v ./tests/
