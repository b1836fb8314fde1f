#!/usr/bin/env bash
# SSD at the SSM's 1e12 Tiny Shakespeare frontier cell (size s, lr x 8, 2048 tokens/step), three seeds
cd "$(dirname "$0")/../../.."
source scripts/data_env.sh
export OMP_NUM_THREADS=1
for seed in 1234 2 3; do
  .venv/bin/python src/train.py experiment=tune_frontier model=ssd data=shakespeare_char \
    model.d_model=42 model.headdim=21 model.num_layers=3 data.bptt=64 data.eval_batch_size=10 \
    trainer.gradient_clip_val=1.0 budget.flops=1e12 budget.evals=10 test=true \
    tune.lr_scale=8 tune.tokens_per_step=2048 seed=$seed logger=csv \
    hydra.run.dir=outputs/ssd_quality/seed$seed > outputs/ssd_quality/seed$seed.log 2>&1
done
