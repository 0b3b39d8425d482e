# PrivForge. The two commands a user needs: `make dataset` and `make test`.
SHELL := /bin/bash
CARGO ?= cargo
PYTHON ?= python3
SOURCES ?= ../shared/data
BIN := target/release/privforge
CONFIG := configs/reference.toml
BUNDLE := outputs/reference
EXPECTED := outputs/reference.SHA256SUMS
VENV := bench/.venv

.PHONY: dataset test build toolchain margins expected bench bench-ipf lint clean

toolchain:
	@command -v $(CARGO) >/dev/null || { echo "cargo not found: install the Rust toolchain (https://rustup.rs)"; exit 1; }

build: toolchain
	$(CARGO) build --release --locked

## Build the reference bundle offline, verify it and prove it is identical to the published one.
dataset: build
	@start=$$(date +%s.%N); \
	$(BIN) build --config $(CONFIG) && \
	$(BIN) verify $(BUNDLE) --expected $(EXPECTED) && \
	end=$$(date +%s.%N) && \
	echo "make dataset: build + verify wall time $$(awk "BEGIN{printf \"%.2f\", $$end - $$start}") s"

## The test suite (unit and end-to-end tests against the real binary).
test: toolchain
	$(CARGO) test --release --locked

## Re-derive population-margins/ from the statistical extracts in $(SOURCES).
margins: build
	$(BIN) margins build --sources $(SOURCES)

## Re-record the expected hashes after an intended change of the reference bundle.
expected: build
	$(BIN) build --config $(CONFIG)
	$(BIN) verify $(BUNDLE) --print-sums > $(EXPECTED)

$(VENV)/bin/python: bench/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r bench/requirements.txt
	touch $@

## IPF benchmark: PrivForge against the Python ipfn package on the identical problem.
bench-ipf: build $(VENV)/bin/python
	$(BIN) bench ipf --config $(CONFIG) --python $(VENV)/bin/python

bench: bench-ipf

lint: toolchain
	$(CARGO) fmt --check
	$(CARGO) clippy --release --locked --all-targets -- -D warnings

clean:
	rm -rf $(BUNDLE) outputs/work
