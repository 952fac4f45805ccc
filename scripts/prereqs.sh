#!/usr/bin/env bash
# Installs the system packages the build and the tests need, when they are
# missing.
# On Debian/Ubuntu it installs them (with sudo when not root); elsewhere it
# says what to install and stops.
set -euo pipefail

need=()
if command -v dpkg-query >/dev/null 2>&1; then
  # bindgen needs libclang and clang's own headers: libclang-dev brings both.
  dpkg-query -W -f='${Status}' libclang-dev 2>/dev/null | grep -q "ok installed" || need+=(libclang-dev)
elif ! ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 \
   && ! ls /usr/lib*/libclang*.so* >/dev/null 2>&1; then
  need+=(libclang-dev)
fi
command -v c++ >/dev/null 2>&1 || need+=(g++)
# The fleet test (tests/it/fleet.rs) runs two daemons behind a real HAProxy
# with the documented configuration (docs/fleet/haproxy.cfg).
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || need+=(haproxy)
# The alert rules (dist/prometheus) are checked and unit-tested by promtool.
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v make >/dev/null 2>&1 || need+=(make)
command -v cargo >/dev/null 2>&1 || { echo "prereqs: cargo is missing; install Rust from https://rustup.rs" >&2; exit 1; }

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi

if command -v apt-get >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "prereqs: need root or sudo to install: ${need[*]}" >&2; exit 1; }
    SUDO=sudo
  fi
  echo "prereqs: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y --no-install-recommends "${need[@]}" \
    || { $SUDO apt-get update && $SUDO apt-get install -y --no-install-recommends "${need[@]}"; }
else
  echo "prereqs: please install: ${need[*]} (libclang and a C++ compiler for the RocksDB bindings, haproxy for the fleet test, promtool from prometheus for the alert rules)" >&2
  exit 1
fi
