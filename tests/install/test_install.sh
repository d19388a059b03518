#!/usr/bin/env bash
# ctest install (part of make test): `make install`'s step, `cmake --install BUILD --prefix P`
# with DESTDIR, into a temporary folder: rmt lands in P/bin (with the CUDA backend's library
# beside it in a build that has one) and runs from there.
# Usage: tests/install/test_install.sh BUILD_DIR
set -euo pipefail
fail() { echo "test_install: FAILED: $*" >&2; exit 1; }
build=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
DESTDIR="$tmp/stage" cmake --install "$build" --prefix /opt/rmt > "$tmp/log" 2>&1 || fail "cmake --install: $(cat "$tmp/log")"
rmt="$tmp/stage/opt/rmt/bin/rmt"
[ -x "$rmt" ] || fail "no $rmt after the install: $(cat "$tmp/log")"
if grep -q '^RMT_CUDA:BOOL=ON$' "$build/CMakeCache.txt"; then
  [ -f "$tmp/stage/opt/rmt/bin/librmt_cuda.so" ] || fail "the CUDA backend's library is not beside rmt"
fi
"$rmt" --version | grep -q '^rmt ' || fail "the installed rmt does not run: $("$rmt" --version 2>&1)"
"$rmt" generate copy --length 3 --train 10 --val 4 --test 4 --out "$tmp/data" > /dev/null || fail "the installed rmt cannot generate"
echo "test_install: ok"
