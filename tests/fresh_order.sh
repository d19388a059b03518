#!/usr/bin/env bash
# CI check: the README's commands work in any order on a fresh machine. On one, `make run` (or
# `make bench`) configures the build before `make test` has installed python3-torch; the golden
# tests must still run once it is. This script clones the committed HEAD of this checkout, then
#   1. configures and builds the clone (`make build`, what `make run` starts with) while torch
#      cannot be imported (a PYTHONPATH entry whose `torch` raises ImportError stands in for a
#      machine without python3-torch),
#   2. still without torch: `make test`'s golden tests fail and say what to install (no skip),
#   3. with torch importable again: `make test`'s golden tests pass in that same build directory.
# Usage: tests/fresh_order.sh [REPO]   (REPO defaults to this checkout; uncommitted changes are
# not in the clone). Needs the packages of `make deps`. Leaves nothing behind when it passes.
set -euo pipefail
repo=$(cd "${1:-$(dirname "$0")/..}" && pwd)
# Inside the checkout (ignored by git as build*/), so that one ccache base dir covers both trees
# and the clone's build reuses the compiled objects of the checkout's own build.
work=$repo/build-fresh-order
rm -rf "$work"
mkdir -p "$work/no-torch/torch"
git clone -q "$repo" "$work/clone"
cat > "$work/no-torch/torch/__init__.py" <<'PY'
raise ImportError("No module named 'torch' (hidden by tests/fresh_order.sh)")
PY
if command -v ccache >/dev/null; then
  export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$repo}
fi
unset RMT_PYTHON
fail() { echo "fresh_order: FAIL: $*" >&2; exit 1; }

echo "== fresh_order: configure and build with torch hidden (as \`make run\` before \`make test\`)"
PYTHONPATH=$work/no-torch make -C "$work/clone" --no-print-directory build > "$work/build.log" 2>&1 \
  || { tail -n 40 "$work/build.log"; fail "make build failed (log: $work/build.log)"; }
PYTHONPATH=$work/no-torch /usr/bin/python3 -c "import torch" 2>/dev/null \
  && fail "torch is still importable: the hiding did not work"
# The golden ctest entries (one reference script may back several, e.g. the guarded golden run).
golden_count=$(cd "$work/clone/build" && ctest -N -R '^golden_' | grep -c 'Test *#')
[ "$golden_count" -gt 0 ] || fail "no golden tests registered in the clone's build"

echo "== fresh_order: golden tests without torch must fail and name what to install"
set +e
PYTHONPATH=$work/no-torch make -C "$work/clone" --no-print-directory test CTEST_ARGS="-R ^golden_" \
  > "$work/hidden.log" 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] || { cat "$work/hidden.log"; fail "golden tests passed without torch"; }
n_missing=$(grep -c "needs a python3 that imports torch and numpy" "$work/hidden.log" || true)
[ "$n_missing" -eq "$golden_count" ] \
  || { cat "$work/hidden.log"; fail "expected $golden_count 'needs a python3 that imports torch' messages, got $n_missing"; }
grep -q "apt-get install python3-torch python3-numpy" "$work/hidden.log" \
  || { cat "$work/hidden.log"; fail "the failure does not say what to install"; }

echo "== fresh_order: torch importable again: \`make test\`'s golden tests in the same build"
make -C "$work/clone" --no-print-directory test CTEST_ARGS="-R ^golden_" > "$work/test.log" 2>&1 \
  || { cat "$work/test.log"; fail "golden tests failed after torch became importable"; }
grep -q "100% tests passed, 0 tests failed out of $golden_count\$" "$work/test.log" \
  || { cat "$work/test.log"; fail "expected $golden_count golden tests to pass"; }
grep "tests passed" "$work/test.log"
rm -rf "$work"
echo "fresh_order: 1 passed, 0 failed"
