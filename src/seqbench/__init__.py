"""seqbench: recurrent networks vs attention models, reproduced on real corpora.

The package is organised in rooms that import only downward (`seqbench.rooms` holds the order):
`nn` pure-torch building blocks; `models`, `tasks`, `data`, `metrics`, `callbacks` the Lightning side
of one family, task and corpus; `training` a run (what `src/train.py` calls) and the one reader of its
record; `analysis` the instruments that load a checkpoint or time a model; `protocol` the equal-tuning
chain; `reports` the pages. The top level keeps what every room shares: the family registry, the
composition of a config, the entry points' helpers, errors, provenance and the table writer.
"""

__version__ = "0.1.0"
