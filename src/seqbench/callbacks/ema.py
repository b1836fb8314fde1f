"""Lightning's `EMAWeightAveraging`, tested as it is validated.

Lightning's callback swaps the moving average in for validation and writes it as the checkpoint's
`state_dict` (the raw weights as `current_model_state`). But after a fit, `trainer.test(ckpt_path=best)`
still finds the callback's averaged model and runs its `on_load_checkpoint`, which loads
`current_model_state` back into the network: the test then scores the raw weights of the chosen
epoch, not the average that validation chose (lightning 2.6). Here the raw weights are taken back only
when a fit resumes, so the tested weights are the checkpoint's `state_dict`, the validated average.
`seqbench.callbacks.NTASGD` guards its load the same way.
"""

from __future__ import annotations

from typing import Any

import lightning as L
from lightning.pytorch.callbacks import EMAWeightAveraging as _LightningEMA
from lightning.pytorch.trainer.states import TrainerFn


class EMAWeightAveraging(_LightningEMA):
    def on_load_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        if trainer.state.fn == TrainerFn.FITTING:
            super().on_load_checkpoint(trainer, pl_module, checkpoint)
