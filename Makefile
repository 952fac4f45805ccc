# Ankusa: `make demo` and `make test` install what they need on Debian/Ubuntu
# (the RocksDB bindings need libclang and a C++ compiler; the fleet test needs
# haproxy; the alert rules' tests need promtool), then run cargo.

SHELL := /bin/bash
# Reuse one compiled RocksDB across clones, sessions and CI runs.
export CARGO_TARGET_DIR ?= /var/tmp/ankusa-target
CARGO ?= cargo

.PHONY: test prereqs build lint demo

prereqs:
	@./scripts/prereqs.sh

build: prereqs
	$(CARGO) build --workspace --all-targets

# Always build the whole workspace in one invocation: cargo unifies the
# features of build-time dependencies over the selected packages, and a subset
# (`-p`, `cargo run`) can select another feature set for bindgen and compile
# RocksDB's C++ a second time.
ANKUSA := $(CARGO_TARGET_DIR)/debug/ankusa

# The lints (fmt, clippy with the workspace's unwrap/expect/unsafe rules) and
# the scheduler's mutation guards (each rule's guard removed in turn must
# fail its test) are part of the test.
test: prereqs lint
	$(CARGO) build --workspace --all-targets
	$(CARGO) test --workspace
	python3 fairness/scripts/mutate_guards.py
	./scripts/verify-unit.sh $(ANKUSA)
	./scripts/check-alerts.sh
	$(ANKUSA) bench gauges --quick
	$(ANKUSA) bench migrate --quick
	$(ANKUSA) bench fairness --quick
	$(ANKUSA) bench delivery --quick

# The whole system on this machine (docs/demo.md): a release build, so the
# demo shows the relay rather than the debug build, then `ankusa demo`.
# Extra arguments: `make demo DEMO_ARGS="--no-console --duration 30s"`.
RELEASE_ANKUSA := $(CARGO_TARGET_DIR)/release/ankusa
DEMO_ARGS ?=

demo: prereqs
	$(CARGO) build --workspace --release
	$(RELEASE_ANKUSA) demo $(DEMO_ARGS)

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
