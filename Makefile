# The first two targets a newcomer needs: `make run` and `make test`.
# Both do their own set-up.

GO      ?= go
BIN     := bin/t1
PKGS    := ./...
export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)

.PHONY: all setup build run test bench lint clean

all: build

# Idempotent: fetches modules; everything the tests need (NATS, S3) is
# embedded in the test binaries.
setup:
	@command -v $(GO) >/dev/null || { echo "Go 1.26+ is required (https://go.dev/dl/)"; exit 1; }
	$(GO) mod download

build: setup
	$(GO) build -o $(BIN) ./runners/t1

# The default pipeline on embedded NATS and S3 under ./.t1.
run: build
	./$(BIN) run

test: setup
	$(GO) test -count=1 -timeout 12m $(PKGS)

# Benchmarks; compare runs with benchstat (go install golang.org/x/perf/cmd/benchstat@latest).
bench: setup
	$(GO) test -run '^$$' -bench . -benchmem -count 5 $(PKGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

clean:
	rm -rf bin .t1
