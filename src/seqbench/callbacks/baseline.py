"""Log the trivial baseline of a synthetic probe beside the model's validation numbers.

A probe DataModule (`seqbench.data.synthetic`) puts the loss and accuracy of the predictor that
learned nothing in `spec.extras["baseline"]`; this callback logs them as `val/baseline_loss` and
`val/baseline_acc` at every validation, so W&B, the CSV history and the run's record all hold the
line a curve is read against. On data without a baseline (a corpus) it does nothing.
"""

from __future__ import annotations

import lightning as L


class ProbeBaseline(L.Callback):
    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking:
            return
        extras = getattr(getattr(pl_module, "spec", None), "extras", None) or {}
        for name, value in (extras.get("baseline") or {}).items():
            pl_module.log(f"val/baseline_{name}", float(value))
