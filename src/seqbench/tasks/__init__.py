"""Task logic shared by every family: loss, metrics and what a step logs, one module per task.

A task says what a batch means and how it is scored; a family says how to compute the prediction.
The contract is one method per task on the family's LightningModule (`lm_logits` for `lm`, ...):
a family supports a task exactly when it implements that method, and the task code below is the
only place the loss and the metrics of that task are computed, for every family alike.
"""

from __future__ import annotations

from seqbench.tasks.lm import LanguageModelling

TASK_CLASSES = {"lm": LanguageModelling}


def make_task(name: str):
    if name not in TASK_CLASSES:
        raise ValueError(f"no task logic for {name!r} yet; known: {', '.join(TASK_CLASSES)}")
    return TASK_CLASSES[name]()
