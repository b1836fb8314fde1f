"""Instruments: tools that load a checkpoint or time a model rather than train it (pipeline speed
against a bare loop, throughput, memory and MFU, gradients, sizes, context use, pictures).

An instrument may build a model and read a run through the run room (`seqbench.training`), and writes
its own measurements with their record (`seqbench.provenance.write_record`); the pages that cite them
are the reports' (`seqbench.reports`), which an instrument never imports (`seqbench.rooms`)."""
