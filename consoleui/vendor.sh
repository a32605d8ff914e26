#!/usr/bin/env bash
# consoleui/vendor.sh — refetch the console's one third-party file, the Graphviz
# WebAssembly module, from npm. Run by hand to upgrade; nothing runs it at build, test
# or run time: the file is committed and embedded with go:embed.
#
#   bash consoleui/vendor.sh            # the pinned version below
#
# To upgrade: change VERSION, run it, put the integrity npm prints into INTEGRITY and
# static/vendor/README.md, and check the console's browser test (TestConsoleInBrowser).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
PKG=@hpcc-js/wasm-graphviz
VERSION=1.29.2
INTEGRITY=sha512-AkArBAZERT5OxH52/+kvCHB07cZ6ZNd9GnOvjw+S880bR88D6i27XfK6xj4dBhUDxNA2QPPMdgEcky3x4TJ3KA==

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
got=$(npm view "$PKG@$VERSION" dist.integrity)
if [[ $got != "$INTEGRITY" ]]; then
	echo "vendor.sh: $PKG@$VERSION has integrity $got, want $INTEGRITY" >&2
	exit 1
fi
(cd "$tmp" && npm pack --silent "$PKG@$VERSION" >/dev/null)
tgz=$(ls "$tmp"/*.tgz)
# npm pack checked the tarball against the registry's integrity; check it again here
# against the pinned one, so a changed registry answer cannot slip through.
sum="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
if [[ $sum != "$INTEGRITY" ]]; then
	echo "vendor.sh: $tgz has integrity $sum, want $INTEGRITY" >&2
	exit 1
fi
tar -xzf "$tgz" -C "$tmp"
cp "$tmp/package/dist/index.js" static/vendor/graphviz.js
cp "$tmp/package/LICENSE" static/vendor/graphviz.LICENSE
ls -l static/vendor/graphviz.js
