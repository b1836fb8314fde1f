#!/usr/bin/env bash
# Start (or restart) a long sweep in the background, resumable across session stops:
#   bash scripts/sweep_background.sh <name> <Hydra overrides...>
#   bash scripts/sweep_background.sh tune_frontier experiment=tune_frontier
# Jobs run two at a time (hydra/launcher=resumable) under outputs/sweeps/<name>/<job number>; the
# same command again skips the completed jobs and resumes the others from their last.ckpt. Stop it:
#   kill -- -$(cat outputs/sweeps/<name>/launcher.pid)        # the launcher's whole process group
# Progress: tail outputs/sweeps/<name>/launcher.log; results: python -m seqbench.reports.report outputs/sweeps/<name>
# Each finished job is also kept in experiments/sweeps/<name>.jsonl (SWEEP_ARCHIVE=<dir>, or none), and
# restored from there when outputs/ is gone (seqbench.protocol.sweep_archive): commit that file as the sweep goes.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: bash scripts/sweep_background.sh <name> <overrides...>" >&2; exit 2; }
name=$1; shift
dir=${SWEEP_ROOT:-outputs/sweeps}/$name
mkdir -p "$dir"
if [ -f "$dir/launcher.pid" ] && kill -0 "$(cat "$dir/launcher.pid")" 2>/dev/null; then
  echo "sweep $name is running already (pid $(cat "$dir/launcher.pid")); its log: $dir/launcher.log" >&2
  exit 1
fi
source scripts/data_env.sh
python=${PYTHON:-.venv/bin/python}
archive=${SWEEP_ARCHIVE:-$PWD/experiments/sweeps}
keep=(); [ "$archive" = none ] || keep=("hydra.launcher.archive=$archive")
echo "== $(date -u +%FT%TZ) launch: $*" >> "$dir/launcher.log"
# setsid: its own process group, so that one kill stops the launcher and its jobs, and the sweep
# survives the shell that started it
setsid nohup "$python" src/train.py -m hydra/launcher=resumable "hydra.sweep.dir=$dir" "${keep[@]}" "$@" \
  >> "$dir/launcher.log" 2>&1 < /dev/null &
echo $! > "$dir/launcher.pid"
echo "sweep $name: pid $(cat "$dir/launcher.pid"), log $dir/launcher.log (the same command resumes it)"
