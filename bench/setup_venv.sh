#!/usr/bin/env bash
# Makes bench/.venv with a current PyTorch for bench/pytorch_reference.py (not needed by make test).
# PyPI has no CPU-only torch wheel: the default Linux wheel also pulls the CUDA runtime packages
# (several GB on disk). They are never loaded on a CPU-only machine, only installed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv"
py="${PYTHON:-python3}"
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import torch" 2>/dev/null; then
  echo "bench/.venv ready: torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)')"
  exit 0
fi
"$py" -m venv "$venv"
"$venv/bin/pip" install --quiet --upgrade pip
"$venv/bin/pip" install --quiet torch numpy
echo "bench/.venv ready: torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)')"
