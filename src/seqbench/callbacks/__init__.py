"""Lightning callbacks of seqbench's own (the rest come straight from Lightning)."""

from seqbench.callbacks.alignment_maps import AlignmentMaps
from seqbench.callbacks.baseline import ProbeBaseline
from seqbench.callbacks.ema import EMAWeightAveraging
from seqbench.callbacks.learning_curve import LearningCurve
from seqbench.callbacks.model_summary import ModelSummary
from seqbench.callbacks.nt_asgd import NTASGD
from seqbench.callbacks.preemption import CheckpointOnSignal
from seqbench.callbacks.process_group_exit import DestroyProcessGroupAtExit
from seqbench.callbacks.progress_log import ProgressLog
from seqbench.callbacks.run_stats import RunStats
from seqbench.callbacks.solve import StopWhenSolved
from seqbench.callbacks.validation_samples import ValidationSamples

__all__ = ["AlignmentMaps", "CheckpointOnSignal", "DestroyProcessGroupAtExit", "EMAWeightAveraging", "LearningCurve", "ModelSummary", "NTASGD", "ProbeBaseline", "ProgressLog", "RunStats", "StopWhenSolved",
           "ValidationSamples"]
