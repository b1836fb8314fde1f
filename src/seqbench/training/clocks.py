"""Which clock times a run: a CPU run at one thread in one process by its CPU seconds, any other by
the wall clock.

The long CPU chains share two cores with each other and with the test suite, and are paused (SIGSTOP)
while a suite runs; their wall clock holds all of that. Measured on 2026-11-28/29 (2-core AMD EPYC):
a PTB final cell took 2,556 s of wall clock and 583 s of CPU, a search trial run beside the suite
117 s and 79 s. A one-thread process's CPU seconds are what an unloaded core would have taken. On a
GPU they are not the training time (the kernels run asynchronously), with several threads they add
up, and with several processes they are rank 0's alone: there the wall clock stays.

A curve counts as CPU-timed only where every validation carries the CPU clock: a run resumed from a
checkpoint written before the clock existed restarted it at 0, and its earlier rows lack it. A table
reads one clock for all its runs (`common_clock`): CPU seconds beside another run's wall seconds would
favour whichever run had the kinder clock.
"""

from __future__ import annotations

import re

CPU_CLOCK = "curve/train_cpu_s"    # the process's CPU seconds in training steps (LearningCurve)
WALL_CLOCK = "curve/train_time_s"  # the wall-clock seconds in training steps
FIT_WALL = "curve/wall_time_s"     # the wall-clock seconds since fit began, carried across segments

_ONE_CORE = re.compile(r"^cpu \(.*\b1 threads?\) x1$")  # run._device_name: "cpu (x86_64, 1 threads) x1"


def one_core(device: str | None) -> bool:
    """Whether the run trained on a CPU at one thread in one process (its record's `device`)."""
    return bool(device and _ONE_CORE.match(device))


def curve_clock(device: str | None, curve: list[dict]) -> str:
    """The curve key that times this run's validations: CPU_CLOCK where it applies and every row has it."""
    if one_core(device) and curve and all(row.get(CPU_CLOCK) is not None for row in curve):
        return CPU_CLOCK
    return WALL_CLOCK


def common_clock(runs: list[tuple[str | None, list[dict]]]) -> str:
    """One clock for runs compared in one table, given (device, curve) each: CPU_CLOCK only where it
    times every one of them, else WALL_CLOCK for all."""
    return CPU_CLOCK if runs and all(curve_clock(d, c) == CPU_CLOCK for d, c in runs) else WALL_CLOCK


def run_seconds(metrics: dict) -> float | None:
    """A finished run's cost in seconds of one core: `cpu_time_s` for a one-core CPU run that recorded
    it, else `wall_time_s`. Both time the process, so a run resumed after a stop has only its last
    segment in them. Its training steps' clock (`CPU_CLOCK`, `WALL_CLOCK`) is carried across segments
    in the checkpoint, and where it is the larger it is the cost: every segment's training steps, no
    setup or validation of any segment, so a lower bound of what a resumed run cost (12 resumed chain
    jobs had 1.2 core-hours missing from their cost, 2026-12-01). A job started from another run's
    checkpoint (`ckpt_path=`) would carry that run's clock too; no sweep does."""
    cpu, wall = metrics.get("cpu_time_s"), metrics.get("wall_time_s")
    if one_core(metrics.get("device")) and cpu is not None:
        return max(float(cpu), float(metrics.get(CPU_CLOCK) or 0.0))
    return None if wall is None else max(float(wall), float(metrics.get(WALL_CLOCK) or 0.0))


def wall_seconds(metrics: dict) -> float | None:
    """A run's wall-clock seconds over every segment: `wall_time_s` times the process, so a run resumed after
    a stop has only its last segment in it (the 1e14 GPT's seed 2 read 268 s for 2,716 s of fitting,
    2026-12-06); `FIT_WALL` is fit's wall time carried in the checkpoint across segments, to the last
    validation (start-up and test excluded). The larger of the two: the whole of a one-segment run, at least
    every segment's fitting of a resumed one."""
    wall, fit = metrics.get("wall_time_s"), metrics.get(FIT_WALL)
    values = [float(v) for v in (wall, fit) if v is not None]
    return max(values) if values else None


def clock_name(key: str) -> str:
    """How a table names the clock its times came from."""
    return ("CPU seconds of training steps (every run trained on one CPU thread and recorded them)"
            if key == CPU_CLOCK else "wall-clock seconds of training steps")
