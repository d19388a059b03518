#!/bin/sh
# Runs a golden test with a python3 that imports torch and numpy, looked up now, when the test
# runs, not when CMake configured the build: a build configured before PyTorch was installed
# (`make run` before `make test` on a fresh machine) must still run the golden tests once it is.
#
#   tests/reference/with_torch.sh SCRIPT.py ARGS...
#
# The interpreter: $RMT_PYTHON if set (CMake's -DRMT_PYTHON=... sets it for ctest); otherwise
# /usr/bin/python3 (where Debian's python3-torch installs), then python3 on PATH. With none that
# imports both, the test fails (exit 1) and says what to install: never a silent skip.
set -u
script=${1:?usage: with_torch.sh SCRIPT.py ARGS...}
shift
name=$(basename "$script" .py)

tried=""
try_python() {  # try_python PY ARGS...: exec's the test with PY if it imports torch and numpy
  py=$1
  shift
  if ! command -v "$py" >/dev/null 2>&1; then
    tried="$tried
  $py: not found"
    return
  fi
  # The import error's last line says what is missing (e.g. "No module named 'torch'").
  why=$("$py" -c "import torch, numpy" 2>&1 >/dev/null) && exec "$py" "$script" "$@"
  tried="$tried
  $py: $(printf '%s\n' "$why" | tail -n 1)"
}

if [ -n "${RMT_PYTHON:-}" ]; then
  try_python "$RMT_PYTHON" "$@"
else
  try_python /usr/bin/python3 "$@"
  try_python python3 "$@"
fi

echo "golden test $name needs a python3 that imports torch and numpy; tried:$tried" >&2
if [ -n "${RMT_PYTHON:-}" ]; then
  echo "RMT_PYTHON=$RMT_PYTHON was given: install torch and numpy there, or unset it to use Debian's." >&2
fi
echo "Install them with: sudo apt-get install python3-torch python3-numpy  (or: make deps-test)" >&2
exit 1
