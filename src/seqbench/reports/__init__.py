"""The reports: what recorded runs say, as pages. The comparison report and its plots, the frontier
and translation tables, what tuning changed, the experiment pages' generated tables, the ledger of
committed records, the findings and `docs/results.md`.

A report reads runs through the run room's reader (`seqbench.training.record`) and committed records
through the ledger, writes its tables with `seqbench.tables`, and never trains (`seqbench.rooms`).
"""
