"""`python -m seqbench.bench`: the throughput and memory benchmark (see seqbench.analysis.bench)."""

from seqbench.analysis.bench import main

if __name__ == "__main__":
    main()
