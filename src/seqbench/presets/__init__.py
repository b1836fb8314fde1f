"""The comparisons' presets, derived rather than written (issue 65), in one package so that the top
level keeps only what every part of the project shares:

- `comparisons`: each comparison's size targets, declared once, and the widths pinned as recorded;
- `sizing`: the solver that finds a family's width for a target, from the model's own count (also run
  when a `model=mixer` run starts, by the run's `build`);
- `derive`: the presets written from the two registries, `python -m seqbench.presets [--write|--check]`.
"""


def main(argv: list[str] | None = None) -> int:
    """`python -m seqbench.presets`: the derivation's command line, imported when called, so that a run
    importing the solver (`seqbench.presets.sizing`) does not load the derivation too."""
    from seqbench.presets.derive import main as derive_main

    return derive_main(argv)
