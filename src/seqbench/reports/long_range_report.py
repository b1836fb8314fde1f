"""Long-range report: the final score of each family against the gap T, with the trivial baseline.

    python src/train.py -m experiment=long_range
    python -m seqbench.reports.long_range_report outputs/multiruns/<time> [more dirs] --out experiments/figures/long-range

Reads every job of the sweep(s) with `seqbench.training.record.read_runs` (the record, the family preset)
and the gap from each job's resolved config (`data.T`). The score is that of the best checkpoint
(by validation loss) on the test set: `test/acc` for copy memory and recall, `test/mse` for the
adding problem; the baseline is the one the data logged (`val/baseline_acc`, `val/baseline_loss`).
Recall also gets its value-frequency plateau (`val/baseline_frequency_acc`, or for runs older than
that metric `seqbench.data.probes.recall_frequency_baseline` of the job's data config): the score of
a model that counts the values and ignores the query, where every family first stalls.
Writes `long_range.md` (a family x T table), `long_range.csv` and `long_range_<metric>.png`.

Sweeps trained until solved (`experiment=long_range_copy|adding|recall`: `solved` and
`steps_to_solve` in each record, the cap from `trainer.max_steps`) get more: a family x T
table of seeds solved, steps to solve (mean over the seeds that solved) and the score (mean and
range over seeds); per family the largest T every seed solved within the cap and the first T where
one did not; and `long_range_solve.png`, score and steps-to-solve against T with the baseline and
the cap drawn in.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import yaml

from seqbench.data.probes import recall_frequency_baseline
from seqbench.families import colour, order
from seqbench.provenance import command_line, write_record
from seqbench.tables import loss_text, table_lines
from seqbench.training.record import Run, read_runs


def _config(run: Run, root_parent: Path) -> dict:
    config = root_parent / run.name / ".hydra" / "config.yaml"
    return (yaml.safe_load(config.read_text()) or {}) if config.is_file() else {}


def gap_of(run: Run, root_parent: Path) -> int | None:
    value = (_config(run, root_parent).get("data") or {}).get("T")
    if value is not None:
        return int(value)
    for token in str(run.metrics.get("overrides", "")).split():
        if token.startswith("data.T="):
            return int(token.split("=", 1)[1])
    return None


def plateau_of(run: Run, config: dict) -> dict:
    """Recall's value-frequency plateau as logged, else from the job's data config; {} for other probes."""
    m = run.metrics
    if m.get("val/baseline_frequency_acc") is not None:
        return {"plateau_acc": m["val/baseline_frequency_acc"], "plateau_loss": m.get("val/baseline_frequency_loss")}
    data = config.get("data") or {}
    if not str(data.get("_target_", "")).endswith("RecallDataModule"):
        return {}
    base = recall_frequency_baseline(int(data.get("num_pairs", 8)), int(data.get("num_values", 8)))
    return {"plateau_acc": base["frequency_acc"], "plateau_loss": base["frequency_loss"]}


def collect(dirs: list[Path]) -> list[dict]:
    """One row per job: family, T, status, test/val scores, baselines, params, wall time."""
    rows = []
    for root in dirs:
        for run in read_runs([root]):
            m, config = run.metrics, _config(run, root.parent)
            rows.append({
                "family": run.family, "T": gap_of(run, root.parent), "status": m.get("status"),
                "test_acc": m.get("test/acc"), "test_loss": m.get("test/loss"), "test_mse": m.get("test/mse"),
                "val_acc": m.get("val/acc"), "val_loss": m.get("val/loss"),
                "baseline_acc": m.get("val/baseline_acc"), "baseline_loss": m.get("val/baseline_loss"),
                "params": m.get("params"), "wall_time_s": m.get("wall_time_s"), "run": run.name,
                "lr": m.get("tune/lr"),  # a tuned sweep's rate (experiment=long_range_lr): the family's row names it
                "error": m.get("error"), "seed": config.get("seed"),
                "solved": m.get("solved"), "steps_to_solve": m.get("steps_to_solve"),
                "cap": (config.get("trainer") or {}).get("max_steps"),
                "plateau_acc": None, "plateau_loss": None, **plateau_of(run, config),
            })
    return rows


def score_key(rows: list[dict]) -> tuple[str, str]:
    """(row key of the score, baseline key): accuracy where the task has one, else MSE."""
    if any(r["test_acc"] is not None for r in rows):
        return "test_acc", "baseline_acc"
    return "test_mse", "baseline_loss"


def reference_lines(rows: list[dict], base_key: str) -> list[tuple[str, float]]:
    """The horizontal lines a score is read against: the trivial baseline and, on recall, the plateau."""
    plateau_key = {"baseline_acc": "plateau_acc", "baseline_loss": "plateau_loss"}.get(base_key)
    lines = []
    for name, key in (("trivial baseline", base_key), ("value-frequency plateau", plateau_key)):
        values = sorted({r[key] for r in rows if key and r.get(key) is not None})
        if values:
            lines.append((name, values[0]))
    return lines


def _draw_references(ax, rows: list[dict], base_key: str) -> None:
    for (name, value), style in zip(reference_lines(rows, base_key), ("--", ":")):
        ax.axhline(value, color="black", linestyle=style, linewidth=1, label=name)


def _families(rows: list[dict]) -> list[str]:
    return order(r["family"] for r in rows)


def table(rows: list[dict], key: str | None = None) -> str:
    """A family x T table of `key` (default: the score), mean over seeds with their range, and the
    baseline row."""
    score, base_key = score_key(rows)
    key = key or score
    if key == "test_loss":
        base_key = "baseline_loss"
    gaps = sorted({r["T"] for r in rows if r["T"] is not None})
    label = {"test_acc": "test accuracy", "test_mse": "test MSE", "test_loss": "test loss"}[key]
    lines = []
    for family in _families(rows):
        cells, params = [], set()
        lrs = sorted({r["lr"] for r in rows if r["family"] == family and r.get("lr") is not None})
        for t in gaps:
            hits = [r for r in rows if r["family"] == family and r["T"] == t]
            if not hits:
                cells.append("not run")
            elif not (values := [h[key] for h in hits if h["status"] == "completed" and h[key] is not None]):
                cells.append("failed")
            else:  # the seeds that completed (one that failed is run again by the resumable launcher)
                mean = sum(values) / len(values)  # a solved probe's loss (2e-04) is not 0.000
                # the seeds' range beside the mean: two seeds that solve and fail average to a "half-solved" cell
                spread = f" (n={len(values)}: {loss_text(min(values))}–{loss_text(max(values))})"
                cells.append(loss_text(mean) + (spread if len(values) > 1 else ""))
                params.update(h["params"] for h in hits if h["params"])
        sizes = "–".join(f"{p:,}" for p in sorted({min(params), max(params)})) if params else ""
        # one rate: a tuned sweep's; several (a search's folders) are not one family's setting, so none is named
        about = "; ".join(x for x in (sizes, f"lr {lrs[0]:.3g}" if len(lrs) == 1 else "") if x)
        name = f"{family} ({about})" if about else family  # GPT's learned positions grow with T
        lines.append([name, *cells])
    for name, value in reference_lines(rows, base_key):
        lines.append([name, *(f"{value:.3f}" for _ in gaps)])
    return f"{label} of the best checkpoint (by validation loss)\n\n" + "\n".join(table_lines(
        ["family (params)", *(f"T = {t}" for t in gaps)], lines))


def plot(rows: list[dict], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    key, base_key = score_key(rows)
    fig, ax = plt.subplots(figsize=(6.5, 4))
    markers = "osD^v<>"
    for i, family in enumerate(_families(rows)):
        points = sorted((r["T"], r[key]) for r in rows
                        if r["family"] == family and r["T"] is not None and r[key] is not None)
        if points:
            xs, ys = zip(*points)
            # families often coincide (at 1.0, at the baseline): later ones thinner, dashed, so all stay visible
            ax.plot(xs, ys, marker=markers[i % len(markers)], markersize=8 - i, linewidth=3 - 0.4 * i,
                    linestyle="-" if i % 2 == 0 else "--", label=family)
    _draw_references(ax, rows, base_key)
    ax.set_xscale("log")
    gaps = sorted({r["T"] for r in rows if r["T"] is not None})
    ax.set_xticks(gaps, [str(t) for t in gaps])
    ax.minorticks_off()
    ax.set_xlabel("gap T (steps)")
    ax.set_ylabel("test accuracy" if key == "test_acc" else "test MSE")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# -- sweeps trained until solved ---------------------------------------------------------------
def _cell(rows: list[dict], family: str, t: int) -> list[dict]:
    return [r for r in rows if r["family"] == family and r["T"] == t]


def _done(hits: list[dict]) -> list[dict]:
    return [h for h in hits if h["status"] == "completed" and h["solved"] is not None]


def _steps(n: float) -> str:
    return f"{round(n):,}"


def solve_table(rows: list[dict]) -> str:
    """Family x T: seeds solved / run, mean steps to solve (over those that solved), score mean (range)."""
    score, _ = score_key(rows)
    gaps = sorted({r["T"] for r in rows if r["T"] is not None})
    caps = sorted({r["cap"] for r in rows if r["cap"]})
    cap = "/".join(_steps(c) for c in caps) or "?"
    lines = []
    for family in _families(rows):
        cells = []
        for t in gaps:
            hits = _cell(rows, family, t)
            done = _done(hits)
            if not hits:
                cells.append("not run")
                continue
            if not done:
                cells.append("failed")
                continue
            solved = [h for h in done if h["solved"]]
            text = f"{len(solved)}/{len(done)}"
            if solved:
                text += f" in {_steps(sum(h['steps_to_solve'] for h in solved) / len(solved))}"
            values = [h[score] for h in done if h[score] is not None]
            if values:
                mean = sum(values) / len(values)
                spread = f" ({min(values):.3f}–{max(values):.3f})" if len(values) > 1 else ""
                text += f"; {mean:.3f}{spread}"
            if len(done) < len(hits):
                text += f"; {len(hits) - len(done)} failed"
            cells.append(text)
        lines.append([family, *cells])
    label = "test accuracy" if score == "test_acc" else "test MSE"
    return (f"seeds solved / run, mean steps to solve (of those that solved; cap {cap} steps, resolution = the "
            f"validation interval); {label} of the best checkpoint, mean (min–max) over seeds\n\n"
            + "\n".join(table_lines(["family", *(f"T = {t}" for t in gaps)], lines)))


def frontier(rows: list[dict]) -> dict[str, tuple[int | None, int | None]]:
    """Per family: (largest T solved by every seed, with every smaller T too; first T not solved by all)."""
    out = {}
    for family in _families(rows):
        largest = first_fail = None
        for t in sorted({r["T"] for r in rows if r["family"] == family and r["T"] is not None}):
            done = _done(_cell(rows, family, t))
            if done and all(h["solved"] for h in done):
                largest = t
            else:
                first_fail = t
                break
        out[family] = (largest, first_fail)
    return out


def frontier_table(rows: list[dict]) -> str:
    return "\n".join(table_lines(["family", "largest T solved by every seed (and every smaller T)", "first T not solved"],
                 ([family, largest if largest is not None else "none", fail if fail is not None else "none (solved at every T run)"]
                  for family, (largest, fail) in frontier(rows).items())))


def plot_solve(rows: list[dict], path: Path, title: str) -> Path:
    """Two panels against T: the score (mean over seeds, baseline dashed), steps to solve (cap dotted)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    score, base_key = score_key(rows)
    gaps = sorted({r["T"] for r in rows if r["T"] is not None})
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    markers = "osD^v<>p"
    for i, family in enumerate(_families(rows)):
        style = dict(marker=markers[i % len(markers)], markersize=8 - 0.6 * i, linewidth=2.5 - 0.3 * i,
                     linestyle="-" if i % 2 == 0 else "--", label=family, color=colour(family, f"C{i}"))
        points, steps = [], []
        for t in gaps:
            done = _done(_cell(rows, family, t))
            values = [h[score] for h in done if h[score] is not None]
            if values:
                points.append((t, sum(values) / len(values)))
            solved = [h["steps_to_solve"] for h in done if h["solved"]]
            if solved:
                steps.append((t, sum(solved) / len(solved)))
        if points:
            left.plot(*zip(*points), **style)
        if steps:
            right.plot(*zip(*steps), **style)
    _draw_references(left, rows, base_key)
    for cap in sorted({r["cap"] for r in rows if r["cap"]}):
        right.axhline(cap, color="black", linestyle=":", linewidth=1, label=f"cap ({cap:,} steps)")
    if score == "test_mse":
        left.set_yscale("log")
    for ax, ylabel in ((left, "test accuracy" if score == "test_acc" else "test MSE"),
                       (right, "steps to solve (mean of the seeds that solved)")):
        ax.set_xscale("log")
        ax.set_xticks(gaps, [str(t) for t in gaps])
        ax.minorticks_off()
        ax.set_xlabel("gap T (steps)")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_report(dirs: list[Path], out: Path, title: str | None = None) -> dict:
    rows = collect(dirs)
    out.mkdir(parents=True, exist_ok=True)
    key, _ = score_key(rows)
    # without --title, name the score the sweep has (an adding sweep is not "copy memory accuracy")
    title = title or f"Long-range probe: {'test MSE' if key == 'test_mse' else 'test accuracy'} against the gap T"
    png = plot(rows, out / f"long_range_{key.split('_')[1]}.png", title)
    text = table(rows)
    if key == "test_acc" and any(r["test_loss"] is not None for r in rows):
        text += "\n\n" + table(rows, "test_loss")
    failed = [r for r in rows if r["status"] != "completed"]
    lines = [f"# {title}", "", text, "", f"![{key}]({png.name})"]
    solve_png = None
    if any(r["solved"] is not None for r in rows):  # trained until solved
        solve_png = plot_solve(rows, out / "long_range_solve.png", title)
        text = solve_table(rows) + "\n\n" + frontier_table(rows) + "\n\n" + text
        lines[2:3] = [text]
        lines += ["", f"![score and steps to solve]({solve_png.name})"]
    if failed:
        lines += ["", "## Failed jobs", ""] + [f"- {r['run']}: {r['error']}" for r in failed]
    (out / "long_range.md").write_text("\n".join(lines) + "\n")
    with open(out / "long_range.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(sorted(rows, key=lambda r: (r["family"], r["T"] or 0)))
    return {"table": text, "png": png, "solve_png": solve_png, "report": out / "long_range.md", "rows": rows}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m seqbench.reports.long_range_report",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", type=Path, help="long_range multirun directories")
    parser.add_argument("--out", type=Path, help="default: <first dir>/long_range")
    parser.add_argument("--title", help="default: names the probes' score (test accuracy or test MSE)")
    args = parser.parse_args(argv)
    started = time.time()
    out = args.out or args.dirs[0] / "long_range"
    result = write_report(args.dirs, out, args.title)
    write_record(out, ["long_range.csv", "long_range.md"], command_line("seqbench.reports.long_range_report", argv),
                 started)  # the ledger: how these numbers were made
    print(result["table"])
    print(f"\nwrote {result['report']} and {result['png'].name}")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
