"""The search's committed record: `python -m seqbench.protocol.tuning <sweep dirs> --report <folder>`.

The sweeps' job directories hold checkpoints and live outside the repository; if that disk goes, the
search's numbers go with it, and a page quoting them would be typed. `--report` writes what the
protocol page reads, small enough to commit, with its ledger record:

- `trials.csv`: one row per trial (running and failed ones too) with its grid point, the rate and
  tokens per step it used, its steps, selection loss, status, wall time and job directory;
- `baseline.csv` (with `--baseline`): the same row for each untuned recipe run;
- `summary.md`: per corpus, the trials and cost of each family's search, and its best setting, best
  and median loss, the grid edge it lies on and (with `--baseline`) the untuned loss beside it; the
  lines that start with "Search" say when the runs were read and whether the search had finished,
  which is what a page's caption quotes (`<!-- table: ... notes=Search -->`);
- `grid-<corpus>.png`: the heatmaps (`tuning_heatmap`);
- `record.json`: command, commit, machine, date (`seqbench.provenance.write_record`).

The loss columns name the data they were selected on: the validation split (PTB), or the first half
of the validation tenth (Tiny Shakespeare with `data.heldout_score`; the second half, the held-out
score, is not read by the search).
"""

from __future__ import annotations

import csv
import time
from pathlib import Path

from seqbench.protocol.tuning_heatmap import plot
from seqbench.protocol.tuning_search import Search, edge_families, searches
from seqbench.protocol.tuning_trials import LEARNED, Trial, planned, read_trials
from seqbench.provenance import utc_now, write_record
from seqbench.tables import loss_text, table_lines

COLUMNS = {"job": "job", "corpus": "corpus", "family": "family", "size": "size", "params": "params_non_embedding",
           "budget": "budget_flops", "lr_scale": "lr_scale", "recipe_lr": "recipe_lr", "lr": "lr",
           "tokens_grid": "tokens_per_step_grid", "tokens_per_step": "tokens_per_step", "steps": "steps",
           "selected_on": "selected_on", "loss": "val_loss_best", "status": "status", "wall_time_s": "wall_time_s",
           "cost_s": "cost_s", "schedule": "schedule", "device": "device", "hardware": "hardware", "git_commit": "git_commit"}


def write_csv(trials: list[Trial], path: Path) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS.values())
        for t in trials:
            writer.writerow(["" if getattr(t, k) is None else getattr(t, k) for k in COLUMNS])
    return path


def _loss(value: float | None) -> str:
    """Three decimals, or two significant digits below 0.01 (a solved probe's loss, 0.0002, is not 0.000)."""
    return "–" if value is None else loss_text(value)


def _or_dash(value) -> str:
    return "–" if value is None else str(value)


def _budget(value: float | None) -> str:
    return "–" if value is None else f"{value:.0e}".replace("e+", "e")


def cost_table(found: list[Search]) -> list[str]:
    head = ["family", "size", "non-emb params", "budget", "grid points", "completed", "failed", "diverged",
            "not finished (running)", "not started", "cost (core-s)", "wall time (s)"]
    return table_lines(head, [[s.family, s.size or "–", f"{s.trials[0].params:,}" if s.trials and s.trials[0].params else "–",
                          _budget(s.budget), len(s.points),
                          s.count("completed"), s.count("failed"), s.count("diverged"), s.count("running"),
                          s.not_started, f"{s.cost_s:,.0f}", f"{s.wall_time_s:,.0f}"] for s in found])


def loss_name(found: list[Search]) -> str:
    """What the loss columns were selected on, named in the header: one corpus's searches share it; a
    probe's search over several gaps says that its best is a mean over them (`Search.best`)."""
    on = sorted({s.selected_on for s in found if s.selected_on})
    name = on[0] if len(on) == 1 else "selection data: see trials.csv"
    gaps = sorted({g for s in found for g in s.gaps})
    return f"{name}, best: mean over T = {', '.join(map(str, gaps))}" if len(gaps) > 1 else name


def _edge(s: Search) -> str:
    """The edges the best lies on ("no": inside), "so far" while the family's search runs."""
    if s.best is None:
        return "–"
    return (", ".join(s.edges()) or "no") + ("" if s.complete else " (so far)")


def best_table(found: list[Search], with_untuned: bool) -> list[str]:
    data = loss_name(found)
    head = ["family", "best lr x", "best lr", "tokens/step (grid)", "tokens/step (used)", f"best loss ({data})",
            f"median loss ({data})", "best on the grid's edge"]
    if with_untuned:
        head += [f"untuned loss ({data})", "tuned − untuned", "tuned beats untuned"]
    rows = []
    for s in found:
        b = s.best
        if s.learned_nothing:  # no best: every trial at the baseline (tuning_search)
            rows.append([s.family, "none learned: recipe's x 1", "–", "–", "–", "–", _loss(s.median_loss), "–"]
                        + (["–"] * 3 if with_untuned else []))
            continue
        row = [s.family, f"{b.lr_scale:g}" if b else "–", f"{b.lr:g}" if b and b.lr is not None else "–",
               _or_dash(b.tokens_grid if b else None), _or_dash(b.tokens_per_step if b else None),
               _loss(b.loss if b else None),
               _loss(s.median_loss), _edge(s)]
        if with_untuned:
            beats = s.tuned_beats_untuned
            row += [_loss(s.untuned_loss), "–" if s.gain is None else f"{s.gain:+.3f}",
                    "–" if beats is None else ("yes" if beats else "no")]
        rows.append(row)
    return table_lines(head, rows)


def notes(found: list[Search], read_at: str, sources: list[str], with_untuned: bool) -> list[str]:
    finished = sum(t.finished for s in found for t in s.trials)
    running = sum(s.count("running") for s in found)
    waiting = sum(s.not_started for s in found)
    total = finished + running + waiting
    state = (f"partial: {running} not finished and {waiting} not started, so a best setting may still change"
             if running or waiting else "complete: every planned trial has finished")
    lines = [f"Search read at {read_at} from {', '.join(sources)}: {finished} of {total} trials finished ({state})."]
    edges = edge_families(found)
    extensions = [name for name in sources if "_edge_" in name]  # the protocol extends once (tuning-protocol.md)
    rule = (f" The grid was extended once already ({', '.join(extensions)}): these edges are reported, not chased."
            if extensions else " The protocol's rule: the grid is extended beyond that edge for every family.")
    lines.append("Search grid edges: " + ("; ".join(f"{f}: {', '.join(e)}" for f, e in edges.items()) + "." + rule
                                          if edges else "no family's best lies on an edge of its grid."))
    blank = [s for s in found if s.learned_nothing]
    if blank:
        chance = sorted({t.baseline for s in blank for t in s.candidates if t.baseline is not None})
        lines.append(f"Search that learned nothing at any rate: {', '.join(s.family for s in blank)}: every completed "
                     f"trial within {LEARNED:.0%} of the loss of a model that learned nothing "
                     f"({', '.join(f'{c:.4f}' for c in chance)}, `val/baseline_loss`), so no rate is picked from the "
                     "noise; the family keeps its recipe's rate (lr x 1).")
    cost, wall = sum(s.cost_s for s in found), sum(s.wall_time_s for s in found)
    lines.append(f"Search cost: {cost:,.0f} core-seconds ({cost / 3600:.2f} h) over the finished trials: CPU seconds "
                 "for one-thread CPU trials that recorded them, wall seconds for the others (seqbench.training.clocks); "
                 f"{wall:,.0f} s of summed wall time. A job resumed after a stop counts its training steps over every "
                 "segment.")
    machines = sorted({t.hardware for s in found for t in s.trials if t.hardware})
    commits = sorted({t.git_commit for s in found for t in s.trials if t.git_commit})
    if machines:
        lines.append(f"Search trials ran on {'; '.join(machines)}, code at git {', '.join(commits) or 'not recorded'}.")
    if with_untuned:
        compared = [s for s in found if s.tuned_beats_untuned is not None]
        unmatched = [s.family for s in found if s.best is not None and s.untuned_loss is None]
        if unmatched:
            lines.append(f"Search without an untuned run at the same size, budget and selection data: {', '.join(unmatched)}.")
        lines.append(f"Search against the untuned recipe: tuned beats untuned for {sum(s.tuned_beats_untuned for s in compared)} "
                     f"of {len(compared)} families with both; the best of many single-seed trials against the "
                     "recipe's run, so a small gain may be the trials' noise.")
    return lines


def summary_md(found: list[Search], read_at: str, sources: list[str], with_untuned: bool) -> str:
    out = ["# The equal-budget search", ""]
    for corpus in dict.fromkeys(s.corpus for s in found):
        mine = [s for s in found if s.corpus == corpus]
        ran = {t.job.split("/", 1)[0] for s in mine for t in s.trials}  # the sweeps that hold this corpus's trials
        own = [name for name in sources if name in ran] or sources  # another corpus's extension is not this one's
        out += [f"## {corpus}", "", *notes(mine, read_at, own, with_untuned), "",
                f"### {corpus}: trials and cost", "", *cost_table(mine), "",
                f"### {corpus}: best setting", "", *best_table(mine, with_untuned), "",
                f"![the search's grid](grid-{corpus}.png)", ""]
    return "\n".join(out)


def write(folder: Path, sweeps: list[Path], baseline: list[Path] | None, command: str) -> list[Search]:
    """Read the sweeps (and the untuned runs), write the record into `folder`; returns the searches."""
    started = time.time()
    folder.mkdir(parents=True, exist_ok=True)
    trials = read_trials(sweeps)
    plans: dict = {}
    for sweep in sweeps:
        for key, points in (planned(sweep) or {}).items():
            plans.setdefault(key, set()).update(points)
    untuned = read_trials(baseline) if baseline else []
    found = searches(trials, plans, untuned)
    files = [write_csv(trials, folder / "trials.csv").name]
    if baseline:
        files.append(write_csv(untuned, folder / "baseline.csv").name)
    for corpus in dict.fromkeys(s.corpus for s in found):
        files.append(plot(found, corpus, folder / f"grid-{corpus}.png").name)
    (folder / "summary.md").write_text(summary_md(found, utc_now(), [Path(s).name for s in sweeps], bool(baseline)),
                                       encoding="utf-8")
    write_record(folder, [*files, "summary.md"], command, started)
    return found
