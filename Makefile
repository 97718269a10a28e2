# sojourn: `make demo` builds everything and runs the demo experiment;
# `make test` runs every test suite. Both install what they need first.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: all setup system build test rust-test py-test demo bench fuzz soak clean

all: build

system:
	@scripts/setup-system.sh

$(VENV)/.installed: python/pyproject.toml scripts/setup-venv.sh
	scripts/setup-venv.sh

setup: system $(VENV)/.installed

build: setup
	cargo build --release --workspace

# One release build serves both the binaries the Python tests drive and the Rust tests.
test: build rust-test py-test

# The pure cores (policies, admission, simulator) once more in the debug profile: its integer
# overflow checks and debug assertions are off in release.
rust-test:
	cargo test --release --workspace
	cargo test -p sojourn-sched -p sojourn-sim

py-test:
	$(PY) -m pytest -q -rs python/tests

# Runs what is missing of results/demo (a finished demo is kept and its table reprinted);
# `make demo DEMO_FLAGS=--fresh` runs it again from scratch. Needs root (namespaces).
DEMO_FLAGS ?=
demo: build
	$(VENV)/bin/sojourn run experiments/demo.toml $(DEMO_FLAGS)

bench: build
	bench/run.sh

# Fuzzes every parser of untrusted input (bench/fuzz/run.sh: cargo-fuzz on nightly Rust for
# requests, responses and traces; atheris for specs, both log importers and traces), each for
# FUZZ_SECONDS (FUZZ_SECONDS=900 REQUEST_CPU_SECONDS=3600 for the long runs of
# docs/reliability.md: the request parser then runs until it has used a CPU hour).
FUZZ_SECONDS ?= 60
fuzz: setup
	FUZZ_SECONDS=$(FUZZ_SECONDS) REQUEST_SECONDS=$(or $(REQUEST_SECONDS),$(FUZZ_SECONDS)) \
	  REQUEST_CPU_SECONDS=$(REQUEST_CPU_SECONDS) bench/fuzz/run.sh

# Soak and fault runs of docs/reliability.md (minutes each; needs root): persistent overload,
# body integrity under loss, slow clients, kill -9 of each process. SOAK_PART=overload etc.
SOAK_PART ?= all
soak: build
	$(PY) bench/soak/run.py $(SOAK_PART)

clean:
	cargo clean
	rm -rf $(VENV)
