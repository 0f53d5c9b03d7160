"""The plain runs of a calibration point (issue 43): each operation's share of a role's CPU from the
instrumented runs, the role's CPU per message and the server's share of its CPUs from the plain runs, and
the self-check judged against the plain runs' throughput."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from demuxlab.ctmc.calibrate import ABLATIONS, PLAIN, PlainRun, SelfCheck, calibrate, self_check
from demuxlab.ctmc.rates import INSTANT_RATE
from demuxlab.errors import DemuxlabError
from helpers.ctmc_runs import DEFAULT_US, server_json


def plain_of(instrumented: dict[str, Any], pace: float, speed: float = 1.0) -> dict[str, Any]:
    """The plain run of the same point: no timings, each role's CPU per message beyond the work ``pace`` ×
    the instrumented run's, every thread runnable 1/``speed`` × its CPU time."""
    res = copy.deepcopy(instrumented)
    res["instrument"] = False
    res["ops"] = {}
    for key in ("events_per_call", "notify_by_events"):
        res.pop(key, None)
    work_s = res["work_us"] * res["messages"] / 1e6
    for t in res["threads_detail"]:
        cpu = t["cpu_s"]["user"] + t["cpu_s"]["sys"]
        spin = work_s if t["messages"] else 0.0
        cpu = spin + (cpu - spin) * pace
        t["cpu_s"] = {"user": cpu / 2, "sys": cpu / 2}
        t["wait_s"] = cpu / speed - cpu
        del t["idle_s"], t["notify_s"]
    return res


@pytest.mark.parametrize("pattern", ["reactor", "hsha", "uring-shared"])
def test_the_plain_runs_give_the_speed_the_instrumented_ones_the_shares(pattern: str) -> None:
    """The instrumented runs spent 1/0.8 of the plain runs' CPU per message beyond the work (the clock
    reads): every rate of every role is the plain runs' pace, each operation keeping its share; the server's
    share of its CPUs is the plain runs' (0.9), not the instrumented runs' (1)."""
    instr = [server_json(pattern, 2.0), server_json(pattern, 2.0, scale=7)]
    plain = [PlainRun(plain_of(r, 0.8, speed=0.9), None) for r in instr]
    rates = calibrate(instr, pattern, plain=plain)
    before = calibrate(instr, pattern)
    assert rates.speed == pytest.approx(0.9) and before.speed == pytest.approx(1.0)
    assert rates.source["speed"].startswith("cpu / runnable time of the server's threads in the 2 plain runs")
    assert "plain runs over the instrumented runs': the " in rates.source["speed"]
    scaled = [
        k for k in ("r_p", "r_g", "r_i", "r_o", "r_a", "r_e") if before.source[k].startswith(("op:", "fit:"))
    ]
    assert len(scaled) >= 3
    for k in scaled:
        assert 1 / getattr(rates, k) == pytest.approx(0.8 / getattr(before, k), rel=1e-6), k
        assert rates.source[k] == before.source[k] + " ×0.8 (plain runs' cpu)"
    assert rates.r_l == before.r_l and rates.r_t == before.r_t  # the lock's median, the paper's cache access
    # Left out (the ablation's "pace"): the instrumented runs' CPU per message as measured.
    same = calibrate(instr, pattern, plain=plain, off=("pace",))
    assert all(getattr(same, k) == pytest.approx(getattr(before, k)) for k in scaled)
    assert "pace" in ABLATIONS


def test_the_self_check_judges_against_the_plain_runs() -> None:
    """The self-check compares the model with the plain runs' throughput (what a prediction is compared
    with), and refuses where that misses by more than 10 %, saying so; a work value without plain runs is
    judged on its instrumented runs."""
    instr = [server_json("reactor", 2.0, work_us=w) for w in (10.0, 50.0)]
    checks: list[SelfCheck] = []
    rates = calibrate(instr, "reactor")
    c10, c50 = self_check(rates, "reactor", instr, [1.0, 1.0])
    assert (c10.work_us, c50.work_us) == (10.0, 50.0)
    plain = [PlainRun(plain_of(instr[0], 1.0), c10.predicted_msgs_per_s)]
    calibrate(instr, "reactor", measured=[c10.predicted_msgs_per_s, c50.predicted_msgs_per_s], plain=plain,
              checks=checks)  # fmt: skip
    assert [(c.work_us, c.against) for c in checks] == [(10.0, PLAIN), (50.0, "instrumented")]
    assert checks[0].as_dict()["against"] == "plain" and abs(checks[0].rel_error) < 0.05
    # The plain runs made a fifth less than the instrumented ones would predict: refused, against them.
    slow = [PlainRun(plain_of(instr[0], 1.0), 0.8 * c10.predicted_msgs_per_s)]
    with pytest.raises(
        DemuxlabError, match=r"for the plain runs of their calibration point run\(s\) at 10 µs"
    ):
        calibrate(instr, "reactor", measured=[None, None], plain=slow, checks=checks)
    assert checks[0].against == PLAIN and checks[0].rel_error == pytest.approx(0.25, abs=0.05)


def test_plain_runs_of_another_point_or_instrumented_ones_are_refused_as_input() -> None:
    instr = [server_json("hsha", 2.0)]
    other = plain_of(instr[0], 1.0)
    other["threads"] = 3
    with pytest.raises(
        DemuxlabError, match=r"plain run #0: is hsha/epoll-lt at 3 threads, not the calibration"
    ):
        calibrate(instr, "hsha", plain=[PlainRun(other, None)])
    with pytest.raises(DemuxlabError, match=r"plain run #0: instrumented, not a plain run"):
        calibrate(instr, "hsha", plain=[PlainRun(instr[0], None)])
    with pytest.raises(DemuxlabError, match=r"calibrate hsha: off: 'r_q' is not a part to leave out"):
        calibrate(instr, "hsha", off=("r_q",))
    # a pace beyond 3× either way is not the same point: refused with the figure
    with pytest.raises(DemuxlabError, match=r"the monitor's cpu per message in the plain runs is 0\.1× the"):
        calibrate(instr, "hsha", plain=[PlainRun(plain_of(instr[0], 0.1), None)])


@pytest.mark.parametrize("part", ["r_x", "r_n", "r_i"])
def test_an_ablation_leaves_one_part_out(part: str) -> None:
    """The rate ablation's parts that are rates: the untimed CPU and α instant, a measured operation back
    to seed 001's value, each with its source saying so."""
    res = server_json("lf", 2.0, alpha_us=1.0, overhead_us=3.0)
    full = calibrate([res], "lf")
    cut = calibrate([res], "lf", off=(part,))
    if part == "r_i":
        assert 1 / full.r_i == pytest.approx(DEFAULT_US["recv"]) and 1 / cut.r_i == pytest.approx(9.2)
        assert cut.source["r_i"].startswith("paper (ablation: seed 001's value")
    else:
        assert getattr(full, part) != INSTANT_RATE and getattr(cut, part) == INSTANT_RATE
        assert cut.source[part].startswith("instant:ablation: ")


def test_the_client_turns_messages_around_at_the_plain_runs_pace() -> None:
    """The client's CPU per message is the plain runs' too (at 0 µs a one-thread server is as fast as its
    client: one instrumented run whose client took 16 µs a message where the plain runs' took 12 predicted
    the plain runs a third too slow): r_z is scaled by the plain runs' client CPU over the instrumented
    runs' (0.75), as a role's rates are by its pace; left out with the pace; refused beyond 3× as a role's
    pace is."""
    instr = [server_json("lf", 2.0)]
    client = {"threads": 1, "messages": 1000, "cpu_s": {"user": 0.004, "sys": 0.012}}  # 16 µs a message
    quick = {"threads": 1, "messages": 2000, "cpu_s": {"user": 0.008, "sys": 0.016}}  # 12 µs a message
    plain = [PlainRun(plain_of(instr[0], 1.0), None, quick)]
    before = calibrate(instr, "lf", clients=[client], plain=[PlainRun(plain_of(instr[0], 1.0), None)])
    rates = calibrate(instr, "lf", clients=[client], plain=plain)
    assert 1 / rates.r_z == pytest.approx(0.75 / before.r_z, rel=1e-6)
    assert rates.source["r_z"] == before.source["r_z"] + " ×0.75 (plain runs' cpu)"
    assert all(getattr(rates, k) == getattr(before, k) for k in ("r_i", "r_o", "r_e", "speed"))
    same = calibrate(instr, "lf", clients=[client], plain=plain, off=("pace",))
    assert same.r_z == pytest.approx(before.r_z) and same.source["r_z"] == before.source["r_z"]
    slow = {"threads": 1, "messages": 1000, "cpu_s": {"user": 0.02, "sys": 0.05}}  # 70 µs: 4.4×
    with pytest.raises(DemuxlabError, match=r"the client's cpu per message in the plain runs is 4.38× the"):
        calibrate(instr, "lf", clients=[client], plain=[PlainRun(plain_of(instr[0], 1.0), None, slow)])
