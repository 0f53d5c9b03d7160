"""predict_many: the bulk entry point (order, equality with predict(), independence of the pool size)."""

from __future__ import annotations

import pytest

from demuxlab.ctmc.predict import PredictRequest, predict, predict_many
from demuxlab.ctmc.rates import paper_rates
from demuxlab.errors import DemuxlabError

# Small but not trivial: every method, both patterns, paper and explicit rates, different seeds and CIs.
REQUESTS = [
    PredictRequest("hsha", 4, 20.0, connections=64, seed=1),
    PredictRequest("lf", 2, 10.0, connections=32, method="fluid"),
    PredictRequest("lf", 6, 10.0, connections=64, rel_ci=0.02, seed=7),
    PredictRequest("hsha", 3, 10.0, connections=4, method="exact"),
    PredictRequest("lf", 3, 50.0, connections=64, rates=paper_rates("lf"), seed=2),
    PredictRequest("hsha", 8, 50.0, connections=128, method="fluid"),
    PredictRequest("hsha", 2, 10.0, connections=16, seed=3),
]


def _one_by_one(reqs: list[PredictRequest]) -> list[object]:
    return [
        predict(
            r.pattern,
            r.threads,
            r.work_us,
            method=r.method,
            connections=r.connections,
            rates=r.rates,
            rel_ci=r.rel_ci,
            seed=r.seed,
        )
        for r in reqs
    ]


def test_predict_many_is_predict_in_request_order() -> None:
    timings: list[float] = []
    got = predict_many(REQUESTS, timings=timings)
    assert got == _one_by_one(REQUESTS)
    assert [(p.pattern, p.threads, p.method) for p in got] == [
        (r.pattern, r.threads, r.method) for r in REQUESTS
    ]
    assert len(timings) == len(REQUESTS) and all(t >= 0.0 for t in timings)
    assert predict_many([]) == []


def test_pool_gives_the_same_results_as_one_process() -> None:
    # jobs=2 runs in spawned workers that load the kernels from the cache; each request has its own seed,
    # so neither the pool size nor the longest-first submission order may change anything.
    one = predict_many(REQUESTS, jobs=1)
    timings: list[float] = []
    two = predict_many(REQUESTS, jobs=2, timings=timings)
    assert two == one
    assert [p.details for p in two] == [p.details for p in one]
    assert len(timings) == len(REQUESTS)


def test_bad_requests_and_jobs_are_refused_before_any_work() -> None:
    with pytest.raises(DemuxlabError, match="jobs"):
        predict_many(REQUESTS, jobs=-1)
    bad = [*REQUESTS[:2], PredictRequest("hsha", 1, 10.0)]
    with pytest.raises(DemuxlabError, match="threads"):
        predict_many(bad, jobs=2)
    with pytest.raises(DemuxlabError, match="method"):
        predict_many([*REQUESTS[:2], PredictRequest("lf", 2, 10.0, method="mva")], jobs=2)
