#!/usr/bin/env bash
# Regenerate every committed record the tuning chains feed, then the pages, the findings and docs/results.md
# that read them:
#   bash scripts/tuning_records.sh            # from the chains' sweeps under outputs/sweeps (SWEEP_ROOT=<dir>)
# Then run tests/test_pages.py, test_findings.py and test_ledger.py, and commit the records with the archive
# (git add experiments): a record committed without the pages and findings regenerated fails the suite.
# One place for the records' commands, so that none is forgotten after the chains have moved on.
set -euo pipefail
cd "$(dirname "$0")/.."
root=${SWEEP_ROOT:-outputs/sweeps}
[ -d "$root" ] || { echo "no sweeps under $root: run or restore the chains first (scripts/campaign_background.sh)" >&2; exit 2; }
source scripts/data_env.sh
python=${PYTHON:-.venv/bin/python}
export PYTHONPATH=src OMP_NUM_THREADS=1  # one thread: beside the chains' runs, torch's default threads are 10x slower
figures=experiments/figures
run() { echo "+ $*" >&2; "$python" -m "$@" > /dev/null; }

for corpus in shakespeare ptb; do
  if [ "$corpus" = ptb ]; then
    experiment=tune_frontier_ptb; untuned=frontier-ptb; cost=(--steps search,untuned,edges,transfer,sizes,seeds)
  else
    experiment=tune_frontier; untuned=frontier-shakespeare; cost=(--top-families rnn,lstm,gru,transformer,gpt)
  fi
  run seqbench.protocol.transfer "$experiment" --root "$root" --report "$figures/transfer-$corpus"
  run seqbench.protocol.campaign "$experiment" --dry-run --root "$root" --jobs 1 "${cost[@]}" \
    --cost-report "$figures/campaign-cost-$corpus"
  run seqbench.reports.frontier_tuned "$experiment" --root "$root" \
    --before "$figures/$untuned/runs.csv" "$figures/$untuned-parallel/runs.csv" \
    --report "$figures/frontier-after-tuning-$corpus"
  # the verdict at scale (issue 64): IsoFLOP profiles, compute laws, the held-out tier, the crossover
  run seqbench.reports.frontier_scaling "$experiment" --root "$root" --report "$figures/scaling-$corpus"
done
# translation under one label-smoothing rule (issue 36, item 5): its sweeps, as far as they have run
translation=(); for sweep in mt_ls mt_ls_pair; do [ -d "$root/$sweep" ] && translation+=("$root/$sweep"); done
[ ${#translation[@]} -eq 0 ] || run seqbench.reports.translation_table "${translation[@]}" \
  --report "$figures/multi30k-label-smoothing"
run seqbench.reports.pages experiments/*.md
run seqbench.reports.findings
run seqbench.reports.results
echo "records, pages and findings regenerated from $root" >&2
