# Ankusa: `make test` and `make demo` install what they need on Debian/Ubuntu
# (the RocksDB bindings need libclang and a C++ compiler), then run cargo.

SHELL := /bin/bash
# Reuse one compiled RocksDB across clones, sessions and CI runs.
export CARGO_TARGET_DIR ?= /var/tmp/ankusa-target
CARGO ?= cargo

.PHONY: test demo prereqs build fmt lint bench-quick

prereqs:
	@./scripts/prereqs.sh

build: prereqs
	$(CARGO) build --workspace --all-targets

test: prereqs
	$(CARGO) build --workspace --all-targets
	$(CARGO) test --workspace
	$(CARGO) run --quiet --bin ankusa -- bench gauges --quick

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

demo: prereqs
	$(CARGO) run --release --bin ankusa -- demo
