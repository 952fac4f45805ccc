#!/usr/bin/env bash
# Checks dist/systemd/ankusa.service with `systemd-analyze verify`, against
# the binary just built (the unit names /usr/local/bin/ankusa, which a build
# machine does not have). Skipped, with a message, where systemd-analyze is
# missing.
set -euo pipefail
bin="${1:?usage: verify-unit.sh PATH-TO-ANKUSA}"
unit="$(dirname "$0")/../dist/systemd/ankusa.service"
if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "verify-unit: systemd-analyze is not installed; dist/systemd/ankusa.service not checked" >&2
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
sed "s#/usr/local/bin/ankusa#$(realpath "$bin")#" "$unit" > "$tmp/ankusa.service"
# --man=no: the Documentation= page is installed with the package, not here.
out="$(systemd-analyze verify --man=no "$tmp/ankusa.service" 2>&1)" || {
  echo "$out" >&2
  echo "verify-unit: dist/systemd/ankusa.service does not verify" >&2
  exit 1
}
if [ -n "$out" ]; then
  echo "$out" >&2
  echo "verify-unit: dist/systemd/ankusa.service has warnings" >&2
  exit 1
fi
echo "verify-unit: dist/systemd/ankusa.service verifies"
