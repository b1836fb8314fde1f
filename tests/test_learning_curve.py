"""The learning curve's clocks (seqbench.callbacks.LearningCurve): the CPU clock counts the step's own work
and not the time its process waited (another job on its core, a SIGSTOP pause of the chain); the wall
clock counts both. Driven directly, one step at a time, with no trainer."""

from __future__ import annotations

import time
from types import SimpleNamespace

import torch

from seqbench.callbacks.learning_curve import LearningCurve

MODULE = SimpleNamespace(device=torch.device("cpu"), task=SimpleNamespace(count_tokens=lambda batch: 10),
                         flops_per_token=lambda length: None)
TRAINER = SimpleNamespace(world_size=1)
BATCH = {"input": torch.zeros(1, 10)}


def _step(curve: LearningCurve, work) -> None:
    curve.on_train_batch_start(TRAINER, MODULE, BATCH, 0)
    work()
    curve.on_train_batch_end(TRAINER, MODULE, None, BATCH, 0)


def _spin(cpu_seconds: float) -> None:
    end = time.process_time() + cpu_seconds
    while time.process_time() < end:
        pass


def test_a_step_that_waits_costs_wall_time_and_no_cpu_time_one_that_works_costs_both():
    # bug caught: the CPU counter read from perf_counter (a pause counted as work), or never advanced
    curve = LearningCurve()
    _step(curve, lambda: time.sleep(0.3))  # the process waits, as under SIGSTOP or a busy core
    assert curve.train_time_s >= 0.3 and curve.train_cpu_s < 0.1
    waited = curve.train_cpu_s
    _step(curve, lambda: _spin(0.2))
    assert curve.train_cpu_s - waited >= 0.2 and curve.train_time_s >= 0.5
    assert curve.tokens == 20


def test_the_cpu_clock_survives_a_resume():
    # bug caught: train_cpu_s left out of the checkpointed state, so a resumed run's curve starts at 0
    curve = LearningCurve()
    _step(curve, lambda: _spin(0.05))
    resumed = LearningCurve()
    resumed.load_state_dict(curve.state_dict())
    assert resumed.train_cpu_s == curve.train_cpu_s > 0
    old = LearningCurve()
    old.load_state_dict({k: v for k, v in curve.state_dict().items() if k != "train_cpu_s"})  # an older checkpoint
    assert old.train_cpu_s == 0.0
