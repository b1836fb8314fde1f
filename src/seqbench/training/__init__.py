"""The run room: what a training job needs at run time, from its composed config to its record.

`run` trains and tests (what `src/train.py` calls), `evaluate` scores a checkpoint (`src/eval.py`),
`tune` applies a job's tuning setting (its size, learning rate and tokens per step from its `tune:`
block), `budget` turns FLOPs into steps; the loggers, the console, the warnings filter, the dashboard
keys and the Hydra callbacks are the run's. `record` writes a run's record and is the one reader of it:
every report, protocol step and instrument reads a run through it. Nothing here imports the protocol,
the reports or the instruments (`seqbench.rooms`).
"""
