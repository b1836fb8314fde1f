"""Which clock times a run (seqbench.training.clocks), and that the frontier's time table, the report's time to
target and the chain's cost table read it.

The bugs these catch: a CPU run paused while the suite ran (its wall clock 4x its CPU time, as a PTB
final cell measured) timed by the wall clock, and so placed behind on the time table and costed 4x;
a run resumed from a checkpoint older than the CPU clock timed by a CPU clock that restarted at 0;
a GPU run, or one at several threads, timed by CPU seconds that are not its training time."""

from __future__ import annotations

import pytest

from seqbench.reports import frontier
from seqbench.protocol import campaign_cost
from seqbench.training.clocks import CPU_CLOCK, WALL_CLOCK, curve_clock, one_core, run_seconds
from seqbench.training.record import Run

ONE_CORE = "cpu (x86_64, 1 threads) x1"


@pytest.mark.parametrize("device, expected", [
    (ONE_CORE, True), ("cpu (, 1 thread) x1", True),
    ("cpu (x86_64, 2 threads) x1", False), ("cpu (x86_64, 11 threads) x1", False),
    ("cpu (x86_64, 1 threads) x2", False), ("NVIDIA H200 x1", False), (None, False), ("", False)])
def test_only_one_thread_in_one_cpu_process_is_timed_by_its_cpu_seconds(device, expected):
    assert one_core(device) is expected


@pytest.mark.parametrize("device_type, workers, threads, expected", [
    ("cpu", 0, 1, True), ("cpu", 2, 1, False), ("cpu", 0, 4, False), ("mps", 0, 1, False)])
def test_a_run_names_what_trained_so_that_only_one_core_runs_read_the_cpu_clock(monkeypatch, device_type, workers,
                                                                                threads, expected):
    """The bugs: DataLoader workers (other processes, outside this one's CPU clock) or an MPS device
    named "cpu (..., 1 threads) x1", so their CPU seconds would be taken for their whole cost."""
    import types

    import torch

    from seqbench.training.run import _device_name

    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    trainer = types.SimpleNamespace(strategy=types.SimpleNamespace(root_device=torch.device(device_type)),
                                    world_size=1)
    assert one_core(_device_name(trainer, workers)) is expected


def _rows(cpu: list[float | None], wall_per_row: float = 40.0) -> list[dict]:
    return [{"val/loss": 3.0 - i * 0.1, "val/ppl": 20.0 - i, "train/flops": 1e9 * (i + 1), "curve/tokens": 100.0 * (i + 1),
             WALL_CLOCK: wall_per_row * (i + 1), CPU_CLOCK: c} for i, c in enumerate(cpu)]


def test_a_curve_is_cpu_timed_only_where_every_row_has_the_cpu_clock():
    assert curve_clock(ONE_CORE, _rows([10.0, 20.0])) == CPU_CLOCK
    assert curve_clock(ONE_CORE, _rows([None, 5.0])) == WALL_CLOCK  # resumed: the clock restarted at 0
    assert curve_clock("NVIDIA H200 x1", _rows([10.0, 20.0])) == WALL_CLOCK
    assert curve_clock(ONE_CORE, []) == WALL_CLOCK


def test_a_run_costs_its_cpu_seconds_on_one_core_and_its_wall_seconds_elsewhere():
    assert run_seconds({"device": ONE_CORE, "cpu_time_s": 583.0, "wall_time_s": 2556.0}) == 583.0
    assert run_seconds({"device": ONE_CORE, "wall_time_s": 2556.0}) == 2556.0  # ran before the CPU clock
    assert run_seconds({"device": "NVIDIA H200 x1", "cpu_time_s": 90.0, "wall_time_s": 60.0}) == 60.0
    assert run_seconds({"device": ONE_CORE}) is None


def test_a_run_resumed_after_a_stop_costs_at_least_its_training_over_every_segment():
    # bug caught: the process clocks restart with each segment, so a chain job stopped near its end and
    # resumed cost 30 s for 323 s of training (12 such jobs: 1.2 core-hours missing from the record)
    resumed = {"device": ONE_CORE, "cpu_time_s": 30.0, "wall_time_s": 41.0, CPU_CLOCK: 323.0, WALL_CLOCK: 900.0}
    assert run_seconds(resumed) == 323.0
    assert run_seconds({**resumed, "device": "NVIDIA H200 x1"}) == 900.0
    assert run_seconds({"device": ONE_CORE, "cpu_time_s": 583.0, CPU_CLOCK: 560.0}) == 583.0  # one segment


def test_a_resumed_run_s_wall_time_is_its_fitting_over_every_segment_not_its_last_process():
    # bug caught: the report's "wall time" was the last process's (`wall_time_s`), so the 1e14 GPT's seed 2,
    # resumed near its end, read 268 s for 2,716 s of fitting (2026-12-06)
    from seqbench.training.clocks import FIT_WALL, wall_seconds

    assert wall_seconds({"wall_time_s": 268.0, FIT_WALL: 2716.0}) == 2716.0
    assert wall_seconds({"wall_time_s": 2800.0, FIT_WALL: 2716.0}) == 2800.0  # one segment: start-up and test too
    assert wall_seconds({"wall_time_s": 10.0}) == 10.0 and wall_seconds({}) is None


def _run(name: str, cpu: list[float | None], device: str = ONE_CORE, family: str = "lstm", **metrics) -> Run:
    m = {"status": "completed", "device": device, "params_non_embedding": 1000, "budget/flops": 2e9, **metrics}
    return Run(name, family, m, _rows(cpu))


def test_the_frontier_times_every_configuration_by_one_clock():
    paused = frontier.configs([_run("a", [10.0, 20.0]), _run("b", [12.0, 22.0])])[0]
    assert paused.clock == CPU_CLOCK and [p["time"] for p in paused.points] == [11.0, 21.0]
    mixed = frontier.configs([_run("a", [10.0, 20.0]), _run("b", [None, 5.0])])[0]  # one seed resumed
    assert mixed.clock == WALL_CLOCK and [p["time"] for p in mixed.points] == [40.0, 80.0]
    text, _, _ = frontier.table([paused], x="time")
    assert "CPU seconds of training steps" in text
    # another family on the wall clock: the CPU-timed family is read on the wall clock too, not at its
    # kinder CPU seconds (it would win the time budgets by its clock alone)
    cfgs = frontier.configs([_run("a", [10.0, 20.0]), _run("g", [1.0, 2.0], family="gru", device="NVIDIA H200 x1")])
    assert {c.clock for c in cfgs} == {WALL_CLOCK} and [p["time"] for p in cfgs[1].points] == [40.0, 80.0]


def test_the_report_reads_one_clock_for_every_row(tmp_path):
    from seqbench.reports.report import write_report

    cpu = [_run("a", [10.0, 20.0]), _run("b", [12.0, 22.0], family="gru")]
    assert _run("a", [10.0, 20.0]).time_to(19.5, CPU_CLOCK) == 20.0
    assert "train time to ppl 19.5 (CPU s)" in write_report(cpu, tmp_path / "cpu", target=19.5)["table"]
    mixed = [_run("a", [10.0, 20.0]), _run("b", [1.0, 2.0], family="gru", device="NVIDIA H200 x1")]
    result = write_report(mixed, tmp_path / "mixed", target=19.5)
    assert "train time to ppl 19.5 (s)" in result["table"]
    assert [row[result["columns"].index("time_to_target_s")] for row in result["rows"]] == [80.0, 80.0]


def test_the_cost_table_counts_cpu_seconds_of_one_core_runs(tmp_path):
    runs = [_run("a", [1.0], cpu_time_s=100.0, wall_time_s=400.0), _run("b", [1.0], cpu_time_s=50.0, wall_time_s=50.0,
                                                                         device="NVIDIA H200 x1")]
    assert campaign_cost.row("sizes", "plan", [], [], runs, [], {}).measured_s == 150.0
    for r in runs:
        r.path = tmp_path / "sizes" / r.name
    assert campaign_cost.rates(runs, {}, set()) == {"lstm": {2e9: (150.0, 4e9)}}
