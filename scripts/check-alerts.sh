#!/usr/bin/env bash
# The alerting kit (dist/prometheus): the rules must load, and each alert
# must fire on the synthetic series of ankusa.rules.test.yml (and stay quiet
# on the others). `make test` runs it; without promtool (Debian's
# `prometheus` package, which scripts/prereqs.sh installs) it says so and
# skips.
set -euo pipefail
cd "$(dirname "$0")/../dist/prometheus"
if ! command -v promtool >/dev/null 2>&1; then
  echo "check-alerts: promtool not found (apt-get install prometheus); skipped" >&2
  exit 0
fi
promtool check rules ankusa.rules.yml
promtool test rules ankusa.rules.test.yml
