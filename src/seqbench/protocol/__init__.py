"""The equal-tuning protocol: the search and its record, the chain of sweeps, the transfer check, the
final cells, the campaign that runs them and what it costs, the sweep archive, and the verdict's rules.

Every step reads the runs of the steps before it through the run room's reader
(`seqbench.training.record`) and writes its own record (`--report`); the pages that cite those
records are the reports' (`seqbench.reports`), above this room (`seqbench.rooms`).
"""
