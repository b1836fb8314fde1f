"""seqbench: recurrent networks vs attention models, reproduced on real corpora.

The package is organised the way the comparison is: `nn` holds pure-torch building blocks (cells,
attention, positions), `models` one LightningModule per architecture family, `data` one
LightningDataModule per corpus family, `analysis` the probes and benchmarks, and `run` the glue that
Hydra's entry points call.
"""

__version__ = "0.1.0"
