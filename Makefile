# rsql: `make run` builds and starts the embedded default; `make test` runs every test.
export PATH := $(PATH):/usr/local/go/bin
GO ?= go

.PHONY: deps test-deps build run test bench fuzz

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
	$(GO) test -count=1 -timeout 20m ./...

bench: build
	$(GO) test -run '^$$' -bench . -benchmem ./exec/ ./broker/

fuzz:
	@for p in $$(grep -l '^func Fuzz' $$(git ls-files '*_test.go') | xargs -n1 dirname | sort -u); do \
	  for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$p/*_test.go | sed 's/func //'); do \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime 20s ./$$p || exit 1; done; done
