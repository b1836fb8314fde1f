#!/usr/bin/env bash
# One prepared GPU session on a lent machine, in two calls (the benchmarks need the GPU to themselves):
#
#   bash scripts/gpu_session.sh bench  OUT              # ~3 min: layer + model throughput vs T, a Zaremba smoke
#   bash scripts/gpu_session.sh zaremba OUT 00:00:06:00 # Zaremba medium and large side by side, capped by max_time
#   bash scripts/gpu_session.sh campaign OUT 7          # the tuning chains' queued runs for 7 minutes (below);
#                                                       # give the call a timeout_s of the minutes + 90 s
#
# campaign: both corpora's chains (python -m seqbench.protocol.campaign: transfer, sizes, seeds) from `.gpu/sweeps`, a
# copy of the CPU chains' finished sweeps, several sweeps at once, each job on the GPU in fp32
# (SEQBENCH_MATMUL_PRECISION=highest: no TF32, cuDNN included), so its result may stand beside the CPU's.
# Every finished job is appended to the archive (experiments/sweeps/*.jsonl, keyed by what it trains, not
# where), which comes back as OUT/archive.tgz: merged into the repository's archive, the CPU chains restore
# those jobs instead of training them. A job's metrics.json names the device it ran on.
#
# The machine has PyTorch and Lightning but not Hydra: `.gpu/site` holds the pure-Python packages copied
# from the CPU venv (hydra, omegaconf, antlr4, dill, wcwidth) and `.gpu/data/ptb` the corpus, both
# ignored by git and carried to the machine. Run directories stay on the machine (the Zaremba large
# checkpoints are 0.3 GB); OUT receives the logs and a tarball of each run without its checkpoints.
set -uo pipefail
phase=${1:?bench|zaremba}
out=${2:?output folder}
cap=${3:-00:00:06:00}
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/src:$PWD/.gpu/site PYTHONUNBUFFERED=1 SEQBENCH_DATA_DIR=$PWD/.gpu/data WANDB_MODE=disabled
work=/tmp/gpu_session
mkdir -p "$work" "$out"
${PY:-python3} - <<'EOF' | tee "$out/device_$phase.txt"
import datetime, platform, torch
print("date", datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())
print("gpu", torch.cuda.get_device_name(0), "cpu", platform.processor() or platform.machine())
EOF
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee -a "$out/device_$phase.txt"
git_commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "git $git_commit" | tee -a "$out/device_$phase.txt"

train() {  # name, then overrides: one run, its directory under $work/runs/<name>
  local name=$1; shift
  ${PY:-python3} src/train.py logger=csv "hydra.run.dir=$work/runs/$name" "$@" > "$work/$name.log" 2>&1
  echo "$name exit $?" | tee -a "$out/device_$phase.txt"
}

if [ "$phase" = bench ]; then
  # the Zaremba medium recipe for 200 steps: the step time the long runs will have
  train smoke_medium experiment=ptb_zaremba_medium trainer.max_epochs=1 trainer.limit_train_batches=200 \
    trainer.limit_val_batches=20 trainer.limit_test_batches=20
  tail -3 "$work/runs/smoke_medium/train.log" 2>/dev/null | tee -a "$out/device_$phase.txt"
  # one layer fwd+bwd against T (issue 35): every method in fp32, the fused ones and the parallel scans in bf16
  timeout 150 python3 -m seqbench.analysis.layer_bench --device cuda --T 512 2048 8192 --batch 16 --width 256 \
    --out "$out/layer_bench_cuda_fp32.json" > "$work/layer_bench_fp32.log" 2>&1
  tail -40 "$work/layer_bench_fp32.log"
  timeout 70 python3 -m seqbench.analysis.layer_bench --device cuda --T 512 2048 8192 --batch 16 --width 256 --bf16 \
    --methods lstm_fused attention_flash attention_efficient mingru_doubling mingru_log minlstm_doubling ssm_doubling \
    --out "$out/layer_bench_cuda_bf16.json" > "$work/layer_bench_bf16.log" 2>&1
  tail -25 "$work/layer_bench_bf16.log"
  # whole models at matched size (the ptb presets), bf16 autocast and flash attention on the GPU
  timeout 90 python3 -m seqbench.analysis.bench --device cuda --batch-sizes 8,32 --lengths 128,512,2048,8192 \
    --families ptb/rnn,ptb/lstm,ptb/gru,ptb/transformer:dropout=0,ptb/gpt:dropout=0 \
    --max-mem-gb 60 --out "$work/bench_cuda" > "$work/bench.log" 2>&1
  tail -40 "$work/bench.log"
elif [ "$phase" = campaign ]; then
  export SEQBENCH_MATMUL_PRECISION=highest
  # one 20-step job through the sweeps' own launcher first: a job forked from its preloaded server must
  # reach the GPU, or the session's minutes would go to jobs that all fail the same way
  ${PY:-python3} src/train.py -m hydra/launcher=resumable hydra.sweep.dir=$work/preflight hydra.launcher.jobs=1 \
    experiment=tune_frontier preset=frontier/shakespeare/lstm debug=fast logger=csv > "$out/preflight.log" 2>&1
  grep -h '"device"' $work/preflight/0/metrics.json | tee -a "$out/device_$phase.txt"
  grep -q '"status": "completed"' $work/preflight/0/metrics.json || { echo "preflight failed: $out/preflight.log"; exit 1; }
  nvidia-smi dmon -s u -d 15 > "$out/dmon.txt" 2>&1 &
  dmon=$!
  # the archive as it stands, every 30 s: a call cut off by its own timeout still brings back the jobs
  # that finished (on 2026-11-29 a 3-minute call ran 20 s past its limit and brought back nothing)
  while sleep 30; do tar czf "$out/archive.tgz.part" experiments/sweeps && mv "$out/archive.tgz.part" "$out/archive.tgz"; done &
  packer=$!
  chains=()
  for experiment in tune_frontier_ptb tune_frontier; do
    timeout "${cap}m" ${PY:-python3} -u -m seqbench.protocol.campaign "$experiment" --root .gpu/sweeps --archive experiments/sweeps \
      --jobs "${JOBS:-3}" --sweeps-at-once "${AT_ONCE:-4}" --steps transfer,sizes,seeds -- logger=csv \
      > "$out/campaign_$experiment.log" 2>&1 &
    chains+=($!)
  done
  wait "${chains[@]}"
  kill $dmon $packer
  date -u +"end %FT%TZ" | tee -a "$out/device_$phase.txt"
  tar czf "$out/archive.tgz" experiments/sweeps
  tar czf "$out/launchers.tgz" .gpu/sweeps/*/launcher.log .gpu/sweeps/*/jobs.jsonl
  exit 0
else
  # both recipes side by side on the one GPU; max_time stops training inside an epoch, then the best
  # checkpoint is tested, so a capped run still reports a real test perplexity
  for size in medium large; do
    train "zaremba_$size" experiment=ptb_zaremba_$size trainer.max_time=$cap \
      callbacks.step_checkpoint.every_n_train_steps=20000 &
  done
  wait
  for size in medium large; do tail -4 "$work/runs/zaremba_$size/train.log" | tee -a "$out/device_$phase.txt"; done
fi
tar czf "$out/$phase.tgz" --exclude='*.ckpt' -C "$work" . && ls -la "$out"
