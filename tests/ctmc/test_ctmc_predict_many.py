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


def test_counts_give_a_steps_firings_per_message_where_the_chain_has_it() -> None:
    """``counts``: how often a chain step fires per message, from the same SSA as the throughput (a step
    the chain lacks is left out: uring has no send that wakes the client, its sends run in the kernel; one
    that never fires, the kick where r_k was not measured, is 0 after ssa.COUNT_MAX_EVENTS events), the
    same through the pool, and refused for a solver that cannot count."""
    from dataclasses import replace

    from demuxlab.ctmc.rates import Host, build
    from demuxlab.ctmc.ssa import COUNT_MAX_EVENTS, simulate

    host = Host(client_threads=1)
    rates = replace(paper_rates("hsha"), r_z=1 / 4.0, r_v=1 / 8.0, r_u=1 / 5.0)
    steps = ("send_wake", "client_wake", "phi12_kick", "no_such_step")
    reqs = [
        PredictRequest(
            "hsha", 2, 0.0, connections=2, rates=rates, rel_ci=0.02, seed=3, host=host, counts=steps
        ),
        PredictRequest("uring", 1, 0.0, connections=2, rel_ci=0.02, seed=3, host=host, counts=("send_wake",)),
    ]
    alone, pooled = predict_many(reqs, jobs=1), predict_many(reqs, jobs=2)
    per = alone[0].details["per_message"]
    assert set(per) == {"send_wake", "client_wake", "phi12_kick"} and alone[1].details["per_message"] == {}
    assert per["phi12_kick"] == 0.0 and not rates.kicks
    assert [p.details["per_message"] for p in pooled] == [p.details["per_message"] for p in alone]
    model = build("hsha", 2, 0.0, 2, rates, host=host)
    msgs = simulate(model, rel_ci=0.02, seed=3).throughput_per_us
    assert alone[0].throughput_msgs_per_s == pytest.approx(msgs * 1e6, rel=1e-12)
    for step in ("send_wake", "client_wake"):
        fired = simulate(model, rel_ci=0.02, seed=3, transition=step, max_events=COUNT_MAX_EVENTS)
        assert per[step] == fired.throughput_per_us / msgs
    assert 0.05 < per["send_wake"] < 1.0  # two connections: a response often finds the client asleep
    with pytest.raises(
        DemuxlabError, match=r"^counts: only the SSA counts a chain's steps, got method 'fluid'$"
    ):
        predict("hsha", 2, 0.0, method="fluid", rates=rates, host=host, counts=steps)
