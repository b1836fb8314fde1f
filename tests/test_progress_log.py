"""The progress line's ETA: scaled from the steps done since this process started training."""

from __future__ import annotations

from types import SimpleNamespace

import lightning as L
import torch

from seqbench.callbacks.progress_log import ProgressLog


class _Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)

    def training_step(self, batch, _):
        return self.layer(batch[0]).pow(2).mean()

    def train_dataloader(self):
        return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 2)), batch_size=8)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _fit(tmp_path, max_steps, ckpt_path=None) -> ProgressLog:
    progress = ProgressLog()
    trainer = L.Trainer(max_steps=max_steps, default_root_dir=tmp_path, logger=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[progress], accelerator="cpu")
    trainer.fit(_Tiny(), ckpt_path=ckpt_path)
    if ckpt_path is None:
        trainer.save_checkpoint(tmp_path / "last.ckpt")
    return progress


def test_a_resumed_run_counts_its_steps_from_the_resumption(tmp_path):
    # bug caught: the start step read at on_fit_start, before Lightning restores the loop state, so it is
    # 0 on resume, and the steps before the checkpoint count as this process's: the ETA far too short
    assert _fit(tmp_path, 3)._start_step == 0
    assert _fit(tmp_path, 6, ckpt_path=tmp_path / "last.ckpt")._start_step == 3


def test_the_eta_scales_the_elapsed_time_by_the_steps_to_go(monkeypatch):
    progress = ProgressLog()
    progress._start, progress._start_step = 100.0, 400  # resumed at step 400
    monkeypatch.setattr("seqbench.callbacks.progress_log.time.perf_counter", lambda: 110.0)
    trainer = SimpleNamespace(current_epoch=4, global_step=500, estimated_stepping_batches=1000, callbacks=[],
                              checkpoint_callback=None, callback_metrics={}, optimizers=[])
    line = progress.line(trainer)
    assert "step 500/1,000" in line and "0:10 elapsed" in line
    assert line.endswith("ETA 0:50")  # 100 steps in 10 s, 500 to go; from step 0 it would read 0:10
