#!/usr/bin/env bash
# Set up, then run the main job: an LSTM language model on the Penn Treebank (CPU recipe, ~10 min).
# Extra arguments are Hydra overrides: bash scripts/train.sh model=gru trainer.max_epochs=2
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/data_env.sh
exec .venv/bin/python src/train.py model=lstm data=ptb "$@"
