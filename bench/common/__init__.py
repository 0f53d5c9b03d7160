"""What the benchmarks share: their command line and one-line errors (:mod:`bench.common.cli`), running a
pinned server against a pinned client (:mod:`bench.common.pairs`), scratch databases
(:mod:`bench.common.db`). None of these is a benchmark."""
