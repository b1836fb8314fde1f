"""Task logic shared by every family: loss, metrics and what a step logs, one module per task.

A task says what a batch means and how it is scored; a family says how to compute the prediction.
The contract is one method per task on the family's LightningModule (`lm_logits` for `lm`,
`classify` for `classification`, `tag` for `tagging`, `regress` for `regression`,
`classify_image` for `image`, `translate_logits` for `translation`, `pretrain_logits` for `mlm`): a family
supports a task exactly when it implements that method, and the task code is the only place the
loss and the metrics of that task are computed, for every family alike.
"""

from __future__ import annotations

from seqbench.tasks.classification import Classification
from seqbench.tasks.image import ImageClassification
from seqbench.tasks.lm import LanguageModelling
from seqbench.tasks.mlm import MaskedLMPretraining
from seqbench.tasks.regression import Regression
from seqbench.tasks.tagging import Tagging
from seqbench.tasks.translation import Translation

TASK_CLASSES = {cls.name: cls for cls in (LanguageModelling, Classification, Tagging, Regression, ImageClassification,
                                              Translation, MaskedLMPretraining)}


def make_task(spec):
    if spec.task not in TASK_CLASSES:
        raise ValueError(f"no task logic for {spec.task!r} yet; known: {', '.join(TASK_CLASSES)}")
    return TASK_CLASSES[spec.task].from_spec(spec)
