"""`python -m seqbench.presets [--write|--check]`: the derivation's command line (`seqbench.presets.derive`)."""

from seqbench.presets import main

raise SystemExit(main())
