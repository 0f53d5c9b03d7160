"""Hostile experiment specs and run records, and what demuxlab makes of them: the fuzzing campaign
(``fuzz_inputs``), the refusals' cost (``fuzz_refusals``) and their shared cases and oracles
(:mod:`bench.fuzz.cases`, also used by tests/unit/test_fuzz_inputs.py)."""
