#!/usr/bin/env bash
# Run the tuning protocol's chain (python -m seqbench.protocol.campaign) in the background, resumable across
# session stops: the same command again goes on where the last one stopped.
#   bash scripts/campaign_background.sh tune_frontier_ptb --jobs 1 -- logger=csv
# Progress: tail outputs/sweeps/campaign_<experiment>.log; state: python -m seqbench.protocol.campaign <experiment> --dry-run
# Stop it: kill -- -$(cat outputs/sweeps/campaign_<experiment>.pid)   (the chain and the sweep it runs)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: bash scripts/campaign_background.sh <tuning experiment> [campaign options] [-- overrides]" >&2; exit 2; }
root=${SWEEP_ROOT:-outputs/sweeps}
mkdir -p "$root"
pid_file=$root/campaign_$1.pid
if [ -f "$pid_file" ] && kill -0 "$(cat "$pid_file")" 2>/dev/null; then
  echo "the $1 chain is running already (pid $(cat "$pid_file")); its log: $root/campaign_$1.log" >&2
  exit 1
fi
source scripts/data_env.sh
python=${PYTHON:-.venv/bin/python}
setsid nohup "$python" -u -m seqbench.protocol.campaign --root "$root" "$@" >> "$root/campaign_$1.log" 2>&1 < /dev/null &
echo $! > "$pid_file"
echo "chain $1: pid $(cat "$pid_file"), log $root/campaign_$1.log (the same command resumes it)"
