"""The registry of pattern models (issue 43): a pattern's model is one record in its module and one line of
the registry, and everything that builds, solves or calibrates a chain finds it there. A toy pattern
registered here at run time is built, solved, calibrated and listed like a built-in one, and gone again
after."""

from __future__ import annotations

from typing import Any

import pytest

from demuxlab import vocab
from demuxlab.ctmc.calibrate import calibrate
from demuxlab.ctmc.engine import RC, RI, RO, FloatArray, ModelStructure, Pool, mass, total
from demuxlab.ctmc.parts import SERVER, client_step, step
from demuxlab.ctmc.pattern import OpRole, PatternModel
from demuxlab.ctmc.predict import predict
from demuxlab.ctmc.rates import (
    DESIGNS,
    SCHEDULED,
    build,
    calibration_threads,
    paper_rates,
    rates_read,
    structures,
)
from demuxlab.ctmc.registry import BUILT_IN, model_of, patterns, register, registered, unregister
from demuxlab.errors import DemuxlabError

# A toy design: one thread per connection's request, no notifier, no lock: receive, work, send.
SPECIES = ("c0", "k1", "k2", "k3")
TOY_CHAIN = ModelStructure(
    name="toy",
    species=SPECIES,
    throughput="send",
    pools=(Pool(SERVER, total(1, 2, 3)),),
    transitions=(
        step("recv", "receives the request", mass(RI, 1), {"k1": -1, "k2": 1}),
        step("work", "works", mass(RC, 2), {"k2": -1, "k3": 1}),
        step("send", "sends the response", mass(RO, 3), {"k3": -1, "c0": 1}),
        client_step(SPECIES, "k1"),
    ),
)


def _initial(threads: int, connections: int, full: bool) -> FloatArray:
    return TOY_CHAIN.state(k1=connections)


TOY = PatternModel(
    "toy",
    TOY_CHAIN,
    _initial,
    (OpRole(("toy",), (("recv", "r_i"), ("send", "r_o")), notifies=False, overhead="r_x", works=True),),
    one_thread=True,
    instant={"r_a": "the toy does not re-arm"},
)


def toy_run(recv_us: float, send_us: float, messages: int = 10_000) -> dict[str, Any]:
    """An instrumented exit JSON of the toy server: each message's CPU is its receive, send and 10 µs work."""
    cpu_s = (recv_us + send_us + 10.0) * messages / 1e6

    def op(us: float) -> dict[str, Any]:
        return {"count": messages, "total_ns": us * 1000 * messages, "mean_ns": us * 1000}

    return {
        "pattern": "toy", "notifier": "none", "threads": 1, "work_us": 10.0, "msg_size": 1,
        "instrument": True, "messages": messages, "connections_accepted": 4, "elapsed_s": 10.0,
        "threads_detail": [
            {"index": 0, "role": "toy", "cpu": 0, "cpu_s": {"user": cpu_s, "sys": 0.0},
             "idle_s": 10.0 - cpu_s, "wait_s": 0.0}
        ],
        "ops": {"recv": op(recv_us), "send": op(send_us), "work": op(10.0)},
    }  # fmt: skip


def test_a_toy_pattern_is_one_record_and_one_registration() -> None:
    with pytest.raises(DemuxlabError, match=r"pattern: must be one of .*, got 'toy'"):
        model_of("toy")
    with registered(TOY):
        assert "toy" in patterns() and model_of("toy") is TOY
        # the thread facts of the model come from its record: one role, one thread
        assert calibration_threads("toy") == 1 and DESIGNS["toy"].max_threads == 1
        assert structures("toy") == (TOY_CHAIN,)
        assert set(rates_read("toy")) == {"r_i", "r_o", "r_z"}
        # built and solved: at one connection the cycle is the receive, the work, the send and the client
        paper = paper_rates("toy")
        assert paper.r_e == pytest.approx(1 / 0.635)  # no waiting dispatcher: LF's r_e
        model = build("toy", 1, 10.0, 1)
        assert model.structure is TOY_CHAIN and model.initial.tolist() == [0.0, 1.0, 0.0, 0.0]
        got = predict("toy", 1, 10.0, method="exact", connections=1).throughput_msgs_per_s
        cycle_us = 1 / paper.r_i + 10.0 + 1 / paper.r_o + 1 / paper.r_z
        assert got == pytest.approx(1e6 / cycle_us, rel=1e-9)
        with pytest.raises(DemuxlabError, match="threads: toy runs at most 1 thread"):
            build("toy", 2, 10.0, 1)
        # calibrated through the same record: its role's operations, the rate it has no step for instant
        rates = calibrate([toy_run(3.0, 1.5)], "toy")
        assert 1 / rates.r_i == pytest.approx(3.0) and 1 / rates.r_o == pytest.approx(1.5)
        assert rates.source["r_a"] == "instant:the toy does not re-arm"
        with pytest.raises(DemuxlabError, match="registered twice"):
            register(TOY)
    with pytest.raises(DemuxlabError, match="got 'toy'"):
        build("toy", 1, 10.0, 1)
    with pytest.raises(DemuxlabError, match="built in"):
        unregister("hsha")


def test_every_pattern_has_one_model_whose_roles_give_its_calibration_concurrency() -> None:
    """The vocabulary's calibration concurrency (which specs read without the models) is the model's: one
    thread per role; and the thread range is not the model's to say (demux-server --list's), beyond what
    its chains need."""
    assert sorted(m.pattern for m in BUILT_IN) == sorted(vocab.PATTERNS)
    for m in BUILT_IN:
        assert vocab.CALIBRATION_THREADS[m.pattern] == m.calibration_threads == len(m.roles)
        assert DESIGNS[m.pattern].max_threads == (1 if m.pattern == "reactor" else None)
    assert DESIGNS["uring-shared"].min_threads == 1 and DESIGNS["hsha"].min_threads == 2
    # a Mapping as the dict it was: an unknown pattern is not in it (the benches' option checks ask so)
    assert "nosuch" not in DESIGNS and DESIGNS.get("nosuch") is None and "nosuch" not in SCHEDULED
    assert sorted(SCHEDULED) == ["hsha", "proactor", "uring-shared"]
