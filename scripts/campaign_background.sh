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
# Low priority by default (CAMPAIGN_NICE=0 on a machine of its own): the chain yields to whatever else runs.
# `nice` alone does not do it on Linux: setsid starts a new session, so the kernel's autogroup scheduler
# gives the chain a group of its own with an equal share of the CPU beside the terminal's group, whatever
# its nice value (seen 2026-12-07: a clean-clone test run moved at about a quarter of its speed beside a
# chain and a run at nice 19). The group's own nice, /proc/self/autogroup, set from inside the new session
# (Linux with autogroup; elsewhere the write fails quietly), is what makes it yield; children inherit it.
nice=${CAMPAIGN_NICE:-19}
setsid nohup bash -c 'echo "$0" > /proc/self/autogroup 2>/dev/null; exec nice -n "$0" "${@}"' "$nice" \
  "$python" -u -m seqbench.protocol.campaign --root "$root" "$@" >> "$root/campaign_$1.log" 2>&1 < /dev/null &
echo $! > "$pid_file"
echo "chain $1: pid $(cat "$pid_file"), log $root/campaign_$1.log (the same command resumes it)"
