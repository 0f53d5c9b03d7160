"""The Model page's what-if without a browser: which rates each pattern's boxes offer, that a typed rate
reaches the prediction (a calibration of several workloads included), and what it says when it cannot."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from demuxlab.ctmc.rates import ALL_RATE_FIELDS, DESIGNS, PATTERNS, Rates, paper_rates
from demuxlab.dashboard.figures import model as figs
from demuxlab.dashboard.whatif import (
    chosen_us,
    override,
    override_notes,
    pattern_rates,
    predict_curve,
    quick_curve,
    rate_fields,
    shown_methods,
    unsettled_note,
)
from demuxlab.vocab import METHOD_EXACT, METHOD_FLUID, METHOD_SSA


def _every_rate_measured(pattern: str) -> Rates:
    """Nothing instant: a calibrated client, its wake-ups and latency, kicks and the scheduler's wake-up, so
    that each rate a chain reads has a step of its own."""
    extra = {"r_n": 1.5, "r_x": 2.0, "r_z": 3.0, "r_w": 20.0, "r_v": 8.0, "r_k": 0.7, "r_u": 30.0, "r_h": 6.0}
    rates: Rates = override(paper_rates(pattern), extra)
    return rates


# Two connections on three threads and two cores: small enough to solve exactly (deterministic: a rate the
# chains do not read leaves the answer bit for bit), where every step of every chain fires.
THREADS, CORES, WORK, CONNECTIONS = 3, 2, 5.0, 2


def _throughput(pattern: str, rates: object, cores: int | None = CORES) -> float:
    threads = min(THREADS, DESIGNS[pattern].max_threads or THREADS)
    curve = predict_curve(pattern, rates, [threads], WORK, CONNECTIONS, METHOD_EXACT, (cores, 2))
    return float(curve["throughput_msgs_per_s"].iloc[0])


def test_the_boxes_are_every_rate_and_each_pattern_gets_those_its_chain_reads() -> None:
    assert rate_fields() == ALL_RATE_FIELDS
    read = {p: set(pattern_rates(p)) for p in PATTERNS}
    # The kernel receives and sends inside io_uring's call: no recv, send or re-arm step of uring's own.
    assert read["uring"] == {"r_t", "r_e", "r_n", "r_x", "r_z"}
    # no notifier: a thread per connection blocks; its send that wakes the client costs ω (r_v), then r_u
    assert {"r_i", "r_o", "r_x", "r_z", "r_v", "r_u"} == read["tpc"]
    assert {"r_k", "r_v", "r_u", "r_w"} <= read["hsha"] and not {"r_k", "r_w"} & read["lf"]
    assert {"r_v", "r_u"} <= read["lf"]  # LF's send wakes the client as every other chain's does
    # a lock handed to a sleeping waiter: uring-shared's submission lock only, and not its client's ω
    assert [p for p in PATTERNS if "r_h" in read[p]] == ["uring-shared"] and "r_v" not in read["uring-shared"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_a_rate_moves_the_prediction_exactly_when_its_pattern_reads_it(pattern: str) -> None:
    """The hidden boxes would change nothing, the shown ones do: each rate ×20 slower, one at a time."""
    rates = _every_rate_measured(pattern)
    base = _throughput(pattern, rates)
    read = pattern_rates(pattern)
    for k in ALL_RATE_FIELDS:
        cores, before = CORES, base
        if pattern == "uring-shared" and k == "r_h":
            # the submission lock's hand-off to a sleeping waiter costs a wake-up where each thread has a
            # core, not on this setting's shared cores
            cores = None
            before = _throughput(pattern, rates, cores)
        moved = _throughput(pattern, override(rates, {k: 20.0 / getattr(rates, k)}), cores)
        if k in read:
            assert moved != pytest.approx(before, rel=1e-4), f"{pattern}: {k} moves nothing"
        else:
            assert moved == before, f"{pattern}: {k} is not read, yet moves it"


def test_a_typed_rate_reaches_each_workload_of_a_calibration() -> None:
    """A calibration of several workloads predicts a workload from its own rates: a typed rate replaces
    the rate there too (it used to replace the pooled rate only, which that workload never read)."""
    lf = paper_rates("lf")
    cal = replace(lf, workloads={"c64/b1": replace(lf, r_i=1 / 4.0), "c512/b1": replace(lf)})
    mine = predict_curve("lf", cal, [1, 2], 10.0, 64, METHOD_FLUID)["throughput_msgs_per_s"].tolist()
    typed = override(cal, {"r_i": 50.0})
    slower = predict_curve("lf", typed, [1, 2], 10.0, 64, METHOD_FLUID)["throughput_msgs_per_s"].tolist()
    assert all(s < 0.5 * m for s, m in zip(slower, mine, strict=True))
    assert typed.workloads["c64/b1"].r_i == typed.workloads["c512/b1"].r_i == typed.r_i == 1 / 50.0
    assert typed.workloads["c64/b1"].source["r_i"] == "what-if"


def test_a_typed_rate_that_changes_nothing_says_why() -> None:
    uring = paper_rates("uring")
    assert override_notes("uring", uring, {"r_x": 2.0}) == []
    (note,) = override_notes("uring", uring, {"r_l": 2.0})
    assert note == "lock acquire/release (r_l): uring's chain does not take this step; it changes nothing."
    hsha = paper_rates("hsha")
    (note,) = override_notes("hsha", override(hsha, {"r_u": 30.0}), {"r_u": 30.0})
    assert note == (
        "woken client's latency (r_u): changes nothing without client waking the dispatcher (ω) (r_v), "
        "client turnaround (r_z) (from a calibration, or typed)."
    )
    two = {"r_u": 30.0, "r_v": 8.0}  # r_v typed too: only the client is missing, for both
    assert override_notes("hsha", override(hsha, two), two) == [
        f"{name}: changes nothing without client turnaround (r_z) (from a calibration, or typed)."
        for name in ("woken client's latency (r_u)", "client waking the dispatcher (ω) (r_v)")
    ]
    typed = {"r_u": 30.0, "r_v": 8.0, "r_z": 3.0}
    assert override_notes("hsha", override(hsha, typed), typed) == []


def test_a_box_shows_the_rate_it_would_replace() -> None:
    lf = paper_rates("lf")
    assert chosen_us(lf, "r_i") == "9.2" and chosen_us(lf, "r_e") == "0.635"
    assert chosen_us(lf, "r_z") == "instant"  # not measured: no client in the chain
    assert chosen_us(paper_rates("lf", "epoll-et"), "r_a") == "instant"  # never re-arms


def test_a_fluid_that_does_not_settle_is_left_out_and_named() -> None:
    """A multireactor thread with one connection (or none spare) is no fluid: its ODE stalls at a tiny
    throughput. The curve leaves those thread counts out (a gap), and the page says where and why."""
    curve = predict_curve("multireactor", paper_rates("multireactor"), [1, 2, 3, 4], 5.0, 4, METHOD_FLUID)
    assert curve["settled"].tolist() == [True, True, False, False]
    assert all(v > 50_000 for v in curve["throughput_msgs_per_s"][:2])
    assert all(math.isnan(v) for v in curve["throughput_msgs_per_s"][2:])
    note = unsettled_note(curve)
    assert note is not None and note.startswith("The fluid approximation does not settle at 3, 4 thread(s)")
    assert unsettled_note(curve[curve["settled"]]) is None
    fig = figs.whatif_figure(curve, pattern="multireactor")
    (line,) = [t for t in fig["data"] if t["name"] == "fluid"]
    assert line["y"][2:] == [None, None] and fig["layout"]["yaxis"]["range"][1] > max(line["y"][:2])
    table = figs.whatif_table(curve, curve)
    assert "settled" not in table
    # a point the fluid left out has nothing to hold against the SSA: not flagged as outside its interval
    assert table["model_outside_ssa_ci"].tolist() == [False, False, False, False]
    # the SSA's points never take the curve's colour: black over a coloured curve, grey over the
    # multireactor's black one
    for pattern in ("multireactor", "hsha"):
        traces = figs.whatif_figure(curve, curve, pattern=pattern)["data"]
        ssa_trace = next(t for t in traces if t["name"] == "SSA (95 % CI)")
        colour = ssa_trace["marker"]["color"]
        assert colour == ssa_trace["error_y"]["color"] == ssa_trace["marker"]["line"]["color"]
        assert colour != next(t for t in traces if t["name"] == "fluid")["line"]["color"]


def test_the_curve_at_once_is_exact_where_the_chain_is_small() -> None:
    """Where the populations are small the fluid is no guide: LF with one connection on 2 cores, seed 001's
    rates, is 57k msg/s at every thread count (one message at a time), and the fluid makes it 40k at 1
    thread and 115k at 16. The curve the page draws at once is the exact solution there, which the SSA
    confirms, and says so per point."""
    lf = paper_rates("lf")
    threads = [1, 2, 4, 8, 16]
    curve = quick_curve("lf", lf, threads, 5.0, 1, (2, None))
    assert curve["method"].tolist() == [METHOD_EXACT] * 5 and shown_methods(curve) == "Exact solution shown"
    ssa = predict_curve("lf", lf, threads, 5.0, 1, METHOD_SSA, (2, None))
    fluid = predict_curve("lf", lf, threads, 5.0, 1, METHOD_FLUID, (2, None))
    for e, s, ci, f in zip(
        curve["throughput_msgs_per_s"],
        ssa["throughput_msgs_per_s"],
        ssa["ci_halfwidth_rel"],
        fluid["throughput_msgs_per_s"],
        strict=True,
    ):
        assert abs(e - s) / s <= ci + 0.01  # the SSA at 3 %: the exact value within its interval (+1 %)
        assert abs(f - e) / e > 0.25  # what the page drew before: the fluid, 30–100 % off
    table = figs.whatif_table(curve, ssa)
    assert table["method"].tolist() == [METHOD_EXACT] * 5 and not table["model_outside_ssa_ci"].any()


def test_the_curve_turns_to_the_fluid_where_the_exact_solution_is_out_of_reach() -> None:
    """HSHA at 8 connections: exact while its states stay few (2 and 3 threads), the fluid from the first
    thread count beyond them on (the states only grow with the threads: no larger count is tried); at 512
    connections the fluid throughout. The figure draws each method as a trace of its own, with gaps where
    the other one stands."""
    hsha = paper_rates("hsha")
    curve = quick_curve("hsha", hsha, [2, 3, 4, 8, 16], 5.0, 8, (2, None))
    methods = curve["method"].tolist()
    assert methods[0] == METHOD_EXACT and methods[-1] == METHOD_FLUID
    assert methods == sorted(methods)  # "exact" < "fluid": never exact again after the first fluid
    first_fluid = methods.index(METHOD_FLUID)
    assert shown_methods(curve).startswith(
        f"Exact solution at {', '.join(map(str, [2, 3, 4, 8, 16][:first_fluid]))}"
    )
    fig = figs.whatif_figure(curve, pattern="hsha")
    exact, fluid = (next(t for t in fig["data"] if t["name"] == m) for m in (METHOD_EXACT, METHOD_FLUID))
    assert exact["line"]["dash"] == "solid" and fluid["line"]["dash"] == "dash"
    assert [y is not None for y in exact["y"]] == [m == METHOD_EXACT for m in methods]
    assert [y is not None for y in fluid["y"]] == [m == METHOD_FLUID for m in methods]
    wide = quick_curve("hsha", hsha, [2, 4], 5.0, 512, (2, None))
    assert wide["method"].tolist() == [METHOD_FLUID] * 2 and shown_methods(wide).startswith(
        "The SSA (95 % CI) beside"
    )
    assert [t["name"] for t in figs.whatif_figure(wide, pattern="hsha")["data"]] == [METHOD_FLUID]


def test_a_tagged_design_is_solved_exactly_wherever_its_thread_has_few_connections() -> None:
    """The multireactor's chain follows one thread and its share of the connections: at 16 connections
    that is 16 at 1 thread (the fluid), then 8, 4, 2 (exact) — where the fluid stalled at 16 threads, one
    connection each, the exact solution answers."""
    mr = paper_rates("multireactor")
    curve = quick_curve("multireactor", mr, [1, 2, 4, 8, 16], 5.0, 16, (2, None))
    assert curve["method"].tolist() == [METHOD_FLUID] + [METHOD_EXACT] * 4
    assert curve["settled"].all() and curve["throughput_msgs_per_s"].min() > 50_000
    assert unsettled_note(curve) is None
