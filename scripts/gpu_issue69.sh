#!/usr/bin/env bash
# Issue 69's GPU part, prepared for a lent H100 (not yet run): one call of at most 10 minutes.
#
#   bash scripts/gpu_issue69.sh prepare PATH/mamba_ssm-2.3.2.post1.tar.gz   # here, on the CPU machine
#   # then one device call: command `bash scripts/gpu_issue69.sh run $OUT`, carry [".gpu69"], timeout_s 600
#
# prepare fills .gpu69/ (a few MiB) with what the GPU image lacks: site/ the pure-Python packages copied
# from this checkout's venv (mambapy, the Mamba-1 peer; hydra, omegaconf and antlr4, which the whole-model
# benchmark composes presets with; wcwidth, which they print through) and mamba_ssm/ the sdist's modules/ssd_minimal.py beside its
# __init__.py (the version the record names). The image has torch, einops and Lightning already.
# .gitignore keeps .gpu69/ out of git; the device call's `carry` takes it along.
#
# run measures, each step under its own timeout so one slow step cannot cost the others:
#   0. SSD and the Mamba-1 block on the GPU against the CPU in float64 (outputs and gradients): the
#      CPU tests' equivalences say nothing of a CUDA-only mistake                           (~20 s)
#   1. one layer fwd+bwd, float32, T = 512, 2,048, 8,192: the fused LSTM (cuDNN), the efficient
#      attention kernel, minGRU's doubling scan, the Mamba-1 block (doubling, in checkpointed pieces),
#      SSD, and the peers (mambapy's parallel scan, mamba-ssm's ssd_minimal)                 (~3 min)
#   2. the same in bf16 autocast with the flash attention kernel: issue 69's targets (SSD >= 3x cuDNN
#      at T >= 2,048; the Mamba-1 block >= 1x at 2,048; memory at T = 8,192 within the card)  (~2 min)
#   3. the whole-model training step (python -m seqbench.analysis.bench) of every LM family at matched size,
#      SSD on the SSM's PTB preset, B = 32, T = 512 .. 8,192, bf16                           (~3 min)
# Records under OUT (at most 8 files come back): session.log, layer_bench_cuda_fp32.json,
# layer_bench_cuda_bf16.json, record.json, bench/bench.{csv,json,png}, bench/record.json. Render the layer
# tables with `python -m seqbench.reports.layer_bench_page experiments/parallel-recurrences.md` after
# adding `<!-- layer-bench: ... -->` and `<!-- layer-targets-69: ... -->` markers for the two JSON files.
set -uo pipefail
phase=${1:?prepare|run}
cd "$(dirname "$0")/.."

if [ "$phase" = prepare ]; then
  sdist=${2:?the path of the mamba-ssm sdist, from pip download mamba-ssm --no-deps --no-binary :all:}
  site=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  rm -rf .gpu69 && mkdir -p .gpu69/site .gpu69/src
  for pkg in mambapy hydra omegaconf antlr4 wcwidth; do
    cp -r "$site/$pkg" .gpu69/site/ || { echo "missing $pkg: pip install -e .[peers] first" >&2; exit 1; }
  done
  cp -r "$site"/mambapy-*.dist-info .gpu69/site/  # its version, for the record
  tar xzf "$sdist" -C .gpu69/src
  mkdir -p .gpu69/mamba_ssm/modules
  cp .gpu69/src/*/mamba_ssm/__init__.py .gpu69/mamba_ssm/__init__.py
  cp .gpu69/src/*/mamba_ssm/modules/ssd_minimal.py .gpu69/mamba_ssm/modules/ssd_minimal.py
  rm -rf .gpu69/src
  du -sh .gpu69
  exit 0
fi

out=${2:?output folder}
mkdir -p "$out/bench"
export PYTHONPATH=$PWD/src:$PWD/.gpu69/site PYTHONUNBUFFERED=1 WANDB_MODE=disabled
PY=${PY:-python3}
log="$out/session.log"
ssd_minimal=$PWD/.gpu69/mamba_ssm/modules/ssd_minimal.py
{
  date -u +"date %Y-%m-%dT%H:%M:%SZ"
  echo "git $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"
} 2>&1 | tee "$log"

echo "== 0. the GPU against the CPU, float64" | tee -a "$log"
timeout 120 $PY - <<'EOF' 2>&1 | tee -a "$log"
import torch
from seqbench.nn.ssd import SSD
from seqbench.nn.ssm import SelectiveSSM

for name, build in (("ssd", lambda: SSD(64, d_state=16, headdim=16, chunk=16)),
                    ("ssm_doubling", lambda: SelectiveSSM(32, scan="doubling", scan_chunk=24))):
    torch.manual_seed(0)
    cpu = build().double()
    gpu = build().double().cuda()
    gpu.load_state_dict(cpu.state_dict())
    x = torch.randn(2, 100, cpu.out_proj.out_features, dtype=torch.float64, requires_grad=True)
    worst = 0.0
    results = []
    for module, inp in ((cpu, x), (gpu, x.detach().cuda().requires_grad_())):
        y, (conv, h) = module(inp)
        loss = (y * torch.cos(y)).sum() + h.sum()
        results.append([y, h, *torch.autograd.grad(loss, [inp, *module.parameters()])])
    for a, b in zip(*results):
        worst = max(worst, (a - b.cpu()).abs().max().item())
    print(f"{name}: largest difference GPU vs CPU (outputs, state, gradients) {worst:.2e}",
          "ok" if worst <= 1e-9 else "MISMATCH")
EOF

echo "== 1. layer benchmark, float32" | tee -a "$log"
timeout 200 $PY -m seqbench.analysis.layer_bench --device cuda --T 512 2048 8192 --batch 16 --width 256 \
  --methods lstm_fused attention_efficient mingru_doubling ssm_doubling ssd_chunked mambapy_pscan ssd_minimal \
  --ssd-minimal "$ssd_minimal" --max-case-s 20 --budget-s 10 \
  --out "$out/layer_bench_cuda_fp32.json" 2>&1 | tail -25 | tee -a "$log"

echo "== 2. layer benchmark, bf16 autocast" | tee -a "$log"
timeout 130 $PY -m seqbench.analysis.layer_bench --device cuda --T 512 2048 8192 --batch 16 --width 256 --bf16 \
  --methods lstm_fused attention_flash ssm_doubling ssd_chunked mambapy_pscan ssd_minimal \
  --ssd-minimal "$ssd_minimal" --max-case-s 20 --budget-s 8 \
  --out "$out/layer_bench_cuda_bf16.json" 2>&1 | tail -20 | tee -a "$log"

echo "== 3. whole-model training step, every LM family" | tee -a "$log"
timeout 200 $PY -m seqbench.analysis.bench --device cuda --batch-sizes 32 --lengths 512,2048,8192 \
  --families ptb/rnn,ptb/lstm,ptb/gru,ptb/mingru,ptb/minlstm,ptb/ssm,ptb/ssm:layer=ssd:d_state=64:headdim=56,ptb/transformer:dropout=0,ptb/gpt:dropout=0 \
  --max-mem-gb 60 --out "$out/bench" 2>&1 | tail -40 | tee -a "$log"
date -u +"done %Y-%m-%dT%H:%M:%SZ" | tee -a "$log"
