#!/usr/bin/env bash
# `make test`: the whole suite, in stages, each timed. The table of stage
# times is printed at the end, and also when a stage fails (then the failed
# stage is the last row), so a slow or cold run says where its time went.
#
# Everything builds on the `release` profile, the one `make demo` builds:
# RocksDB's C++ is then compiled once for both (docs/testing.md, "Build and
# time"). Tests run under cargo-nextest when it is installed (a process per
# test, the 120 s limit of .config/nextest.toml, a JUnit report), otherwise
# under `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/ankusa-target}"
CARGO=${CARGO:-cargo}
ANKUSA="$CARGO_TARGET_DIR/release/ankusa"

names=()
secs=()
started=$(date +%s)

table() {
  local total=$(( $(date +%s) - started ))
  echo
  echo "make test: stage times"
  local i
  for i in "${!names[@]}"; do
    printf '  %-16s %5d s\n' "${names[$i]}" "${secs[$i]}"
  done
  printf '  %-16s %5d s\n' "total" "$total"
}

# stage NAME COMMAND...: runs COMMAND, records its time under NAME, and on
# failure prints the table and exits with COMMAND's status.
stage() {
  local name=$1
  shift
  echo "==> $name: $*"
  local t0 rc=0
  t0=$(date +%s)
  "$@" || rc=$?
  names+=("$name")
  secs+=("$(( $(date +%s) - t0 ))")
  if [ "$rc" -ne 0 ]; then
    table
    echo "make test: stage '$name' failed (exit $rc)" >&2
    exit "$rc"
  fi
}

run_tests() {
  if "$CARGO" nextest --version >/dev/null 2>&1; then
    "$CARGO" nextest run --workspace --release --no-fail-fast
  else
    echo "cargo-nextest is not installed: running cargo test (no per-test limit)"
    "$CARGO" test --workspace --release --no-fail-fast
  fi
}

benches() {
  "$ANKUSA" bench gauges --quick
  "$ANKUSA" bench migrate --quick
  "$ANKUSA" bench fairness --quick
  "$ANKUSA" bench delivery --quick
}

checks() {
  ./scripts/verify-unit.sh "$ANKUSA"
  ./scripts/check-alerts.sh
}

stage prereqs ./scripts/prereqs.sh
stage fmt "$CARGO" fmt --all -- --check
stage clippy "$CARGO" clippy --workspace --all-targets --release -- -D warnings
stage build "$CARGO" build --workspace --all-targets --release
stage tests run_tests
stage mutation-guards python3 fairness/scripts/mutate_guards.py
stage checks checks
stage quick-benches benches
table
