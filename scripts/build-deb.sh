#!/usr/bin/env bash
# Builds the Debian package of Ankusa from a built binary:
#
#   scripts/build-deb.sh BINARY OUTDIR      # prints the .deb's path
#
# e.g. `cargo build --workspace --profile dist && scripts/build-deb.sh
# $CARGO_TARGET_DIR/dist/ankusa dist/out`. The package holds the binary,
# the systemd unit, the example configuration as /etc/ankusa/ankusa.toml (a
# conffile, with the store in /var/lib/ankusa/store), the shell completions
# and man pages the binary generates, and the alerting kit; its postinst
# creates the `ankusa` system user. dpkg-deb builds it directly (no
# cargo-deb, so nothing beyond Debian's own tools is needed); the file list
# lives here only, and tests/it/dist.rs checks it with `dpkg-deb -c`.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 BINARY OUTDIR" >&2
  exit 2
fi
bin=$1
out=$2
root=$(cd "$(dirname "$0")/.." && pwd)
[ -x "$bin" ] || { echo "build-deb: $bin is not an executable" >&2; exit 3; }
command -v dpkg-deb >/dev/null 2>&1 || { echo "build-deb: dpkg-deb is missing (apt-get install dpkg)" >&2; exit 4; }

version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n1)
arch=$(dpkg --print-architecture 2>/dev/null || echo amd64)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
pkg=$stage/ankusa

install -d "$pkg/DEBIAN" "$pkg/usr/bin" "$pkg/lib/systemd/system" "$pkg/etc/ankusa" \
  "$pkg/usr/share/man/man1" "$pkg/usr/share/bash-completion/completions" \
  "$pkg/usr/share/zsh/vendor-completions" "$pkg/usr/share/fish/vendor_completions.d" \
  "$pkg/usr/share/ankusa/prometheus" "$pkg/usr/share/doc/ankusa"

install -m 0755 "$bin" "$pkg/usr/bin/ankusa"
# Debian ships binaries stripped (the dist profile already is; the release
# profile keeps its symbols, and one with debug info half a gigabyte of line
# tables).
if command -v strip >/dev/null 2>&1; then
  strip --strip-unneeded "$pkg/usr/bin/ankusa"
fi
# The unit as shipped in dist/ names /usr/local/bin (a hand install); the
# package installs to /usr/bin.
sed 's#/usr/local/bin/ankusa#/usr/bin/ankusa#g' "$root/dist/systemd/ankusa.service" \
  > "$pkg/lib/systemd/system/ankusa.service"
chmod 0644 "$pkg/lib/systemd/system/ankusa.service"
# The example, with the store where the unit's StateDirectory= puts it. It
# holds secrets once edited: readable by root and the ankusa group only
# (postinst sets the group).
sed 's#^path = "ankusa-data"#path = "/var/lib/ankusa/store"#' "$root/ankusa.example.toml" \
  > "$pkg/etc/ankusa/ankusa.toml"
chmod 0640 "$pkg/etc/ankusa/ankusa.toml"

"$bin" man --out "$pkg/usr/share/man/man1" >/dev/null
gzip -9n "$pkg"/usr/share/man/man1/*.1
"$bin" completions bash > "$pkg/usr/share/bash-completion/completions/ankusa"
"$bin" completions zsh > "$pkg/usr/share/zsh/vendor-completions/_ankusa"
"$bin" completions fish > "$pkg/usr/share/fish/vendor_completions.d/ankusa.fish"
install -m 0644 "$root"/dist/prometheus/ankusa.rules.yml "$root"/dist/prometheus/ankusa.rules.test.yml \
  "$root"/dist/prometheus/ankusa-dashboard.json "$pkg/usr/share/ankusa/prometheus/"
install -m 0644 "$root/README.md" "$pkg/usr/share/doc/ankusa/README.md"
cp -r "$root/docs" "$pkg/usr/share/doc/ankusa/docs"
find "$pkg/usr/share" -type f -exec chmod 0644 {} +

size=$(du -sk "$pkg" | cut -f1)
cat > "$pkg/DEBIAN/control" <<EOF
Package: ankusa
Version: $version
Architecture: $arch
Maintainer: Ankusa developers <ankusa@localhost>
Installed-Size: $size
Depends: libc6, adduser
Section: net
Priority: optional
Description: durable, multi-tenant webhook relay
 Ankusa accepts webhooks over HTTP, commits each to a RocksDB store before
 acknowledging it, and delivers it to its sinks with retries, a dead-letter
 queue and a fair dispatcher, so that one noisy tenant cannot starve the
 others. It comes with an operator console for the terminal.
EOF
echo "/etc/ankusa/ankusa.toml" > "$pkg/DEBIAN/conffiles"
cat > "$pkg/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
  if ! getent passwd ankusa >/dev/null; then
    adduser --system --group --home /var/lib/ankusa --no-create-home \
      --shell /usr/sbin/nologin --quiet ankusa
  fi
  chgrp ankusa /etc/ankusa/ankusa.toml
  if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null || true
  fi
fi
exit 0
EOF
cat > "$pkg/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null || true
fi
exit 0
EOF
chmod 0755 "$pkg/DEBIAN/postinst" "$pkg/DEBIAN/postrm"

mkdir -p "$out"
deb="$out/ankusa_${version}_${arch}.deb"
dpkg-deb --root-owner-group --build "$pkg" "$deb" >/dev/null
echo "$deb"
