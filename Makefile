# Ankusa: `make demo` and `make test` install what they need on Debian/Ubuntu
# (the RocksDB bindings need libclang and a C++ compiler; the fleet test needs
# haproxy; the alert rules' tests need promtool), then run cargo.

SHELL := /bin/bash
# Reuse one compiled RocksDB across clones, sessions and CI runs.
export CARGO_TARGET_DIR ?= /var/tmp/ankusa-target
CARGO ?= cargo

.PHONY: test prereqs build lint demo soak

prereqs:
	@./scripts/prereqs.sh

build: prereqs
	$(CARGO) build --workspace --all-targets --release

# Always build the whole workspace in one invocation: cargo unifies the
# features of build-time dependencies over the selected packages, and a subset
# (`-p`, `cargo run`) can select another feature set for bindgen and compile
# RocksDB's C++ a second time. `make test` and `make demo` both build on the
# release profile, so they share one compiled RocksDB.
ANKUSA := $(CARGO_TARGET_DIR)/release/ankusa

# The lints (fmt, clippy with the workspace's unwrap/expect/unsafe rules), the
# build, every test, the scheduler's mutation guards (each rule's guard
# removed in turn must fail its test), the unit and alert checks and the
# quick benches, each stage timed (scripts/test.sh prints the table).
test:
	./scripts/test.sh

# The long versions of the slow end-to-end tests, run by hand
# (docs/testing.md, "Build and time"): 100 SIGKILLs, two minutes of chaos.
soak: prereqs
	$(CARGO) build --workspace --all-targets --release
	ANKUSA_CRASH_KILLS=100 ANKUSA_CHAOS_SECS=120 $(CARGO) nextest run --workspace --release \
	  --profile soak -E 'test(chaos::) | test(=daemon_crash::every_acknowledged_hook_is_delivered_or_dead_under_a_sigkill_loop)'

# The whole system on this machine (docs/demo.md): a release build, so the
# demo shows the relay rather than the debug build, then `ankusa demo`.
# Extra arguments: `make demo DEMO_ARGS="--no-console --duration 30s"`.
DEMO_ARGS ?=

demo: prereqs
	$(CARGO) build --workspace --release
	$(ANKUSA) demo $(DEMO_ARGS)

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --release -- -D warnings
