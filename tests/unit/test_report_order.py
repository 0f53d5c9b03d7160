"""points.csv does not depend on the order the runs were read in: a bundle's reproduce reads them in
another order than the workflow and compares the tables to the digit (CI found the mean CPU per message
and the mean throughput differing in their last bits)."""

from __future__ import annotations

import random

from demuxlab.report import PointRows, RunRow, summarize
from demuxlab.vocab import RUN_OK


def test_every_column_is_the_same_in_any_run_order() -> None:
    rng = random.Random(3)
    runs = [
        RunRow(
            status=RUN_OK,
            throughput=rng.uniform(4e4, 6e4),
            stationary=True,
            server_cpu_s=rng.uniform(1.0, 3.0),
            server_messages=rng.randrange(100_000, 300_000),
            latency_p50_us=rng.uniform(10, 90),
            latency_p99_us=rng.uniform(100, 900),
        )
        for _ in range(9)
    ]
    first = summarize([PointRows("p", {"threads": 1}, list(runs))])
    orders = [random.Random(seed).sample(runs, len(runs)) for seed in range(40)]
    plain = {
        sum(r.server_cpu_s / r.server_messages for r in o if r.server_cpu_s and r.server_messages)
        for o in orders
    }
    assert len(plain) > 1  # a plain sum of these values does depend on the order
    for order in orders:
        assert summarize([PointRows("p", {"threads": 1}, order)]) == first
