#!/usr/bin/env bash
# Create .venv (once) and install seqbench with its extras (SEQBENCH_EXTRAS, default dev: the test tools)
# from this checkout's pyproject.toml.
# torch is pinned to 2.13.0: on the CPU machines this project is built on, pip takes the CPU wheel
# from the local disk; on a GPU machine install the CUDA build of 2.13.0 first (docs/commands.md, "GPU machines").
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[${SEQBENCH_EXTRAS:-dev}]" 2>&1 \
  | grep -v "^WARNING: Location" || true
.venv/bin/python -c "import seqbench, torch, lightning, hydra" \
  || { echo "setup failed: seqbench did not import after installing" >&2; exit 1; }
