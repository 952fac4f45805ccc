#!/usr/bin/env bash
# Resident memory of the daemon, and of the console following it, on a small
# and a large store of the same shape (ten rows per tenant): issue 19's
# "daemon memory flat (within 20%) between 10^4 and 10^6 queued rows".
#
# Each store is a fresh copy of an `ankusa store fixture`, served by
# `ankusa serve` with every sink refusing connections, so every claim fails
# and is retried: the dispatcher walks the whole backlog and RocksDB reads
# all of it, which is what fills caches. VmRSS is read from /proc every 10 s;
# at the end RocksDB's own parts from /metrics (ankusa_store_memory_bytes),
# then the console is opened beside the daemon (in a pseudo-terminal, via
# script(1)) and its VmRSS read after it has drawn for a while.
#
# Usage: scripts/bench-memory.sh [--quick]
#   ANKUSA   the binary (default: target/release/ankusa; measure release)
#   DIR      where fixtures are kept between runs (default /var/tmp/ankusa-memory)
#   SECS     how long each daemon runs (default 120; --quick 30)
#   ENVS     extra environment for the daemon, e.g. "MALLOC_ARENA_MAX=2"
# Sizes: 10^4 rows / 10^3 tenants against 10^6 / 10^5 (--quick: 10^3 / 10^2
# against 10^5 / 10^4). Prints one line per sample and a summary; exits 0
# whatever the figures (the rule is judged by the reader, docs/benchmarks.md).
set -euo pipefail

bin=${ANKUSA:-target/release/ankusa}
dir=${DIR:-/var/tmp/ankusa-memory}
secs=${SECS:-120}
small=(10000 1000)
large=(1000000 100000)
if [[ ${1:-} == --quick ]]; then
  secs=${SECS:-30}
  small=(1000 100)
  large=(100000 10000)
fi
bin=$(realpath "$bin")
mkdir -p "$dir"

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

fixture() { # rows tenants -> prints the fixture's directory
  local f="$dir/fixture-$1-$2"
  if [[ ! -e $f/CURRENT ]]; then
    rm -rf "$f"
    "$bin" store fixture --format 3 --out "$f" --rows "$1" --tenants "$2" --seed 7 >/dev/null
  fi
  echo "$f"
}

measure() { # rows tenants
  local rows=$1 tenants=$2 run="$dir/run-$1"
  local src
  src=$(fixture "$rows" "$tenants")
  rm -rf "$run"
  mkdir -p "$run"
  cp -r "$src" "$run/store"
  cat >"$run/ankusa.toml" <<EOF
[store]
path = "$run/store"
[http]
listen = "127.0.0.1:0"
[[sources]]
id = "shop"
tenant_header = "x-tenant"
[[sources.sinks]]
url = "http://127.0.0.1:1/a"
[[sources.sinks]]
url = "http://127.0.0.1:1/b"
[[sources]]
id = "billing"
tenant_header = "x-tenant"
[[sources.sinks]]
url = "http://127.0.0.1:1/a"
[[sources.sinks]]
url = "http://127.0.0.1:1/b"
EOF
  # shellcheck disable=SC2086
  env ${ENVS:-} RUST_LOG=error "$bin" serve --config "$run/ankusa.toml" >"$run/serve.out" 2>"$run/serve.err" &
  local pid=$! addr="" t=0 peak=0 r
  # Boot recovers the fixture's inflight rows and counts what waits per
  # sink: tens of seconds on the large store.
  local boot=0
  for _ in $(seq 600); do
    addr=$(grep -o 'listening on http://[0-9.:]*' "$run/serve.out" 2>/dev/null | sed 's/listening on //') || true
    [[ -n $addr ]] && break
    sleep 0.5
    boot=$((boot + 1))
  done
  echo "  rows $rows: daemon up after $((boot / 2)) s, rss $(($(rss_kb "$pid") / 1024)) MB"
  [[ -n $addr ]] || { echo "daemon did not start: $(cat "$run/serve.err")" >&2; kill "$pid"; exit 1; }
  while ((t < secs)); do
    sleep 10
    t=$((t + 10))
    r=$(rss_kb "$pid")
    ((r > peak)) && peak=$r
    echo "  rows $rows: daemon ${t}s rss $((r / 1024)) MB"
  done
  local parts
  parts=$(curl -s "$addr/metrics" | awk '/^ankusa_store_memory_bytes/ {
      match($0, /part="[a-z_]+"/); p = substr($0, RSTART + 6, RLENGTH - 7);
      printf "%s %d MB  ", p, $2 / 1048576 }')
  # The console beside the running daemon (a follower), drawing the overview.
  local crss=0
  sleep 40 | script -qfc "$bin console --store $run/store" /dev/null >/dev/null 2>&1 &
  local sp=$!
  sleep 25
  local cpid
  cpid=$(pgrep -f "^$bin console --store $run/store" | head -1) || true
  [[ -n $cpid ]] && crss=$(rss_kb "$cpid")
  [[ -n $cpid ]] && kill "$cpid" 2>/dev/null || true
  wait "$sp" 2>/dev/null || true
  r=$(rss_kb "$pid")
  ((r > peak)) && peak=$r
  kill -TERM "$pid"
  wait "$pid" || true
  printf 'rows %8d tenants %6d: daemon rss %4d MB (peak %4d MB), %s| console rss %4d MB\n' \
    "$rows" "$tenants" $((r / 1024)) $((peak / 1024)) "$parts" $((crss / 1024)) | tee -a "$dir/summary"
}

echo "== $(date -u +%FT%TZ) $bin ${ENVS:-} (${secs}s per daemon)" | tee -a "$dir/summary"
measure "${small[@]}"
measure "${large[@]}"
