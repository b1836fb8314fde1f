#!/usr/bin/env bash
# Set up, then run the whole test suite (the slow tier included: DDP, resume, sweeps), as CI does.
# While editing, the quick tier is: .venv/bin/python -m pytest -m "not slow"
set -euo pipefail
cd "$(dirname "$0")/.."
SEQBENCH_EXTRAS=dev,hub bash scripts/setup.sh   # hub: the WikiText-2 download path is tested too
source scripts/data_env.sh
# a test whose corpus is missing fails here rather than skipping (tests/conftest.py); set 0 to skip them
export SEQBENCH_REQUIRE_CORPORA="${SEQBENCH_REQUIRE_CORPORA:-1}"
# pytest-xdist: one worker per CPU (`logical`), one torch thread each (tests/conftest.py); worksteal
# gives the tests still queued on a busy worker to an idle one. `-n 0` after it runs them in one process.
exec .venv/bin/python -m pytest -n logical --dist worksteal "$@"
