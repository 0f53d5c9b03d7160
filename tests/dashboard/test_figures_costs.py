"""The "why" builders (demuxlab.dashboard.figures.costs) on frames: a cost the host could not give is named
with its reason and never drawn as a zero; the checks come in the vocabulary's order with a fail in
capitals; the verdict line names the failed checks; the Sweep's cost axis averages a point's runs and draws
a flagged run hollow."""

from __future__ import annotations

from typing import Any

import pandas as pd

from demuxlab.costs import METRICS
from demuxlab.dashboard.figures import costs as figs

NO_RAPL = "unavailable: no RAPL zone under /sys/class/powercap"


def _costs() -> pd.DataFrame:
    return pd.DataFrame(
        [
            ("server", "syscalls", 300_000.0, 3.0, None),
            ("server", "cpu_sys_s", 1.5, 15.0, None),
            ("client", "syscalls", 290_000.0, 2.9, None),
            ("server", "energy_uj", None, None, NO_RAPL),
            ("client", "energy_uj", None, None, NO_RAPL),
        ],
        columns=["side", "metric", "value", "per_message", "unavailable"],
    )


def test_the_breakdown_draws_what_was_measured_and_names_what_was_not() -> None:
    fig = figs.breakdown_figure(_costs())
    bars = {(t["name"], y): x for t in fig["data"] for y, x in zip(t["y"], t["x"], strict=True)}
    assert bars[("server", "system calls")] == 3.0 and bars[("client", "system calls")] == 2.9
    assert bars[("server", "process CPU, system")] == 15.0
    assert not any("energy" in y for _, y in bars)  # unavailable: not a bar of 0
    notes = " ".join(a["text"] for a in fig["layout"]["annotations"])
    assert f"server energy (RAPL packages), client energy (RAPL packages): {NO_RAPL}" in notes
    # a long reason over many metrics wraps (an annotation runs off the figure otherwise), the words all kept
    ended = (
        "unavailable: 1 of its threads ended before the end reading: a sum over its threads would miss theirs"
    )
    many = pd.concat(
        [
            _costs(),
            pd.DataFrame(
                [("client", m, None, None, ended) for m in figs.CPU_METRICS + figs.EVENT_METRICS],
                columns=["side", "metric", "value", "per_message", "unavailable"],
            ),
        ]
    )
    (note,) = figs.breakdown_figure(many)["layout"]["annotations"][-1:]
    lines = note["text"].split("<br>")
    assert len(lines) > 2 and all(len(line) <= figs.NOTE_WRAP for line in lines)
    assert ended.split(": ", 1)[1] in " ".join(lines) and "client CPU migrations" in " ".join(lines)
    assert "no costs recorded" in str(figs.breakdown_figure(_costs().iloc[0:0]))


def test_every_bar_label_fits_beside_its_panel() -> None:
    """Each line of a bar's label is at most LABEL_WRAP characters (13 px text, ~7.5 px a character, inside
    the 250 px margin): unwrapped, "its CPUs: softirq (the network stack's receive)" was cut to "s: softirq
    (…)" on the Run page; the words all stay."""
    every = pd.DataFrame(
        [(side, m.name, 1.0, 1.0, None) for side in ("server", "client") for m in METRICS],
        columns=["side", "metric", "value", "per_message", "unavailable"],
    )
    fig = figs.breakdown_figure(every)
    labels = {y for t in fig["data"] for y in t["y"]}
    assert labels and all(len(line) <= figs.LABEL_WRAP for y in labels for line in y.split("<br>"))
    assert fig["layout"]["margin"]["l"] >= figs.LABEL_WRAP * 7.5
    assert any("softirq" in y for y in labels)
    assert {" ".join(y.split("<br>")) for y in labels} == {
        m.label for m in METRICS if m.name in (*figs.CPU_METRICS, *figs.EVENT_METRICS)
    }


def test_the_cost_table_gives_each_side_or_why_not() -> None:
    table = figs.cost_table(_costs()).set_index("cost")
    assert table.loc["system calls", "server per msg"] == "3.00"
    assert table.loc["system calls", "server over the phase"] == "300,000"
    assert table.loc["process CPU, system", "client per msg"] == "not read"
    assert table.loc["energy (RAPL packages)", "client per msg"] == NO_RAPL


def test_the_thread_table_says_which_thread_pays_per_message_of_the_run() -> None:
    """HSHA's two threads on one CPU (a real run's record, rounded): the handler blocks about once per
    message, the reactor thread makes most calls; each thread's events over the run's messages (throughput
    × the side's interval; system calls over the binary's own interval); a value the record lacks is "not
    read", never 0."""
    side = {
        "interval_s": 3.0,
        "syscalls_interval_s": 2.0,
        "threads": [
            {"tid": 10, "comm": "demux-server", "cpus": "0", "new": False, "voluntary": 3, "involuntary": 0,
             "migrations": 0, "run_s": 0.001, "wait_s": 0.0, "syscalls": 2},
            {"tid": 11, "comm": "demux-server", "cpus": "0", "new": False, "voluntary": 30_000,
             "involuntary": 3_000, "migrations": 0, "run_s": 0.9, "wait_s": 0.3, "syscalls": 40_000},
            {"tid": 12, "comm": "demux-server", "cpus": "0", "new": True, "voluntary": 27_000,
             "involuntary": 27_000, "migrations": None, "run_s": 1.2, "wait_s": 0.6, "syscalls": None},
        ],
    }  # fmt: skip
    table = figs.thread_table({"server": side, "client": "unavailable: remote"}, 10_000.0)
    assert list(table["thread"]) == ["demux-server 10", "demux-server 11", "demux-server 12 (new)"]
    rows = table.set_index("thread")
    assert rows.loc["demux-server 11", "voluntary switches /msg"] == "1.00"  # 30,000 / (10,000 × 3 s)
    assert rows.loc["demux-server 11", "system calls /msg"] == "2.00"  # 40,000 / (10,000 × 2 s)
    assert rows.loc["demux-server 12 (new)", "on a CPU µs/msg"] == "40.00"  # 1.2 s / 30,000 msgs
    assert rows.loc["demux-server 12 (new)", "system calls /msg"] == "not read"
    assert rows.loc["demux-server 12 (new)", "migrations /msg"] == "not read"
    assert figs.thread_table(None, 10_000.0).empty and figs.thread_table({"server": side}, None).iloc[
        0, 3
    ] == ("not read")


def test_checks_in_order_and_the_verdict_line() -> None:
    checks = pd.DataFrame(
        [
            ("cpu.governor", "unknown", "cpufreq absent", None),
            ("placement.core", "fail", "server and client share core 0/0", None),
            ("independence", "pass", "rho 0.1", 0.1),
            ("cpu.turbo", "warn", "turbo on", None),
        ],
        columns=["check", "verdict", "reason", "value"],
    )
    table = figs.check_table(checks)
    assert list(table["check"]) == ["independence", "placement.core", "cpu.governor", "cpu.turbo"]
    assert list(table["verdict"]) == ["pass", "FAIL", "unknown", "warn"]
    line = figs.verdict_line(checks)
    assert line.startswith("FLAGGED: placement.core failed") and "warnings: cpu.turbo" in line
    assert "1 could not be told" in line
    passed = figs.verdict_line(checks[checks["verdict"] == "pass"])
    assert passed == "Not flagged: 1 checks passed."
    assert "No validity checks" in figs.verdict_line(checks.iloc[0:0])


def test_the_sweep_cost_axis_averages_runs_and_marks_the_flagged_ones() -> None:
    rows = []
    for threads, values in ((1, (3.0, 5.0)), (2, (4.0, 4.0))):
        for i, v in enumerate(values):
            rows.append(
                {
                    "pattern": "reactor",
                    "notifier": "epoll-lt",
                    "threads": threads,
                    "work_us": 0.0,
                    "connections": 64,
                    "hardware_class": None,
                    "run_id": f"r{threads}{i}",
                    "flagged": i == 1,
                    "per_message": v,
                    "unavailable": None,
                }
            )
    fig = figs.sweep_cost_figure(pd.DataFrame(rows), x="threads", metric="syscalls", side="server")
    line, runs = fig["data"]
    assert line["name"] == "reactor · epoll-lt" and line["x"] == [1.0, 2.0] and line["y"] == [4.0, 4.0]
    assert runs["marker"]["symbol"] == ["circle", "circle-open", "circle", "circle-open"]
    # the axis: side and unit, short enough to stand beside 420 px; the title names the cost
    assert fig["layout"]["yaxis"]["title"]["text"] == "server: calls/msg"
    assert "system calls (calls/msg)" in fig["layout"]["title"]["text"]
    missing = pd.DataFrame(rows).assign(per_message=None, unavailable=NO_RAPL)
    empty = figs.sweep_cost_figure(missing, x="threads", metric="energy_uj", side="server")
    assert NO_RAPL in str(empty) and not empty["data"]


def _value(component: Any, id_: str) -> Any:
    """The ``value`` of the component ``id_`` under ``component`` (a Dash layout)."""
    if getattr(component, "id", None) == id_:
        return component.value
    children = getattr(component, "children", None)
    for child in children if isinstance(children, list) else [children] if children is not None else []:
        found = _value(child, id_)
        if found is not None:
            return found
    return None


def test_the_sweep_cost_axis_opens_on_the_addressed_cost_and_side() -> None:
    """The Sweep's address keeps the cost axis's choice (cost=, side=); an unknown value, the default."""
    from demuxlab.dashboard import why

    block = why.sweep_block("ctx_voluntary", "client")
    assert (_value(block, "sweep-cost-metric"), _value(block, "sweep-cost-side")) == (
        "ctx_voluntary",
        "client",
    )
    block = why.sweep_block("no such cost", "both")
    assert (_value(block, "sweep-cost-metric"), _value(block, "sweep-cost-side")) == (
        why.DEFAULT_METRIC,
        "server",
    )


def test_the_sweep_cost_axis_says_which_designs_it_leaves_out_and_why() -> None:
    """A design none of whose runs has the cost is not silently missing from the cost axis: a note under
    the plot names it with its runs' reason (the smoke's tpc: its connection threads end before the end
    reading, so its sums over threads are unavailable)."""
    why = "unavailable: 1 of its threads ended before the end reading"
    rows = [
        {
            "pattern": pattern,
            "notifier": notifier,
            "threads": 1,
            "work_us": 0.0,
            "connections": 64,
            "hardware_class": None,
            "run_id": f"{pattern}{i}",
            "flagged": False,
            "per_message": None if pattern == "tpc" else 0.5,
            "unavailable": why if pattern == "tpc" else None,
        }
        for pattern, notifier in (("reactor", "epoll-lt"), ("tpc", "none"))
        for i in range(2)
    ]
    fig = figs.sweep_cost_figure(pd.DataFrame(rows), x="threads", metric="ctx_voluntary", side="server")
    assert [t["name"] for t in fig["data"] if t.get("showlegend", True)] == ["reactor · epoll-lt"]
    notes = [a["text"] for a in fig["layout"].get("annotations", [])]
    assert notes == [f"not shown: tpc · none: {why}"], notes
    whole = figs.sweep_cost_figure(
        pd.DataFrame([r for r in rows if r["pattern"] == "reactor"]),
        x="threads",
        metric="ctx_voluntary",
        side="server",
    )
    assert not whole["layout"].get("annotations"), whole["layout"].get("annotations")


def test_cycles_and_instructions_are_in_the_table_and_their_absence_under_the_breakdown() -> None:
    """The hardware counters (thousands a message) are not bars beside the kernel's few events: the cost
    table has them per side, a number or the kernel's reason; the breakdown names an unavailable one."""
    no_pmu = "unavailable: no hardware performance counters (perf_event_open: No such file or directory)"
    costs = pd.concat(
        [
            _costs(),
            pd.DataFrame(
                [
                    ("server", "cycles", 6e9, 20_000.0, None),
                    ("server", "instructions", 9e9, 30_000.0, None),
                    ("client", "cycles", None, None, no_pmu),
                    ("client", "instructions", None, None, no_pmu),
                ],
                columns=["side", "metric", "value", "per_message", "unavailable"],
            ),
        ]
    )
    table = figs.cost_table(costs).set_index("cost")
    assert table.loc["CPU cycles (hardware counter)", "server per msg"] == "20,000"
    assert table.loc["instructions retired (hardware counter)", "server over the phase"] == "9,000,000,000"
    assert table.loc["CPU cycles (hardware counter)", "client per msg"] == no_pmu
    fig = figs.breakdown_figure(costs)
    assert not any("hardware counter" in y for t in fig["data"] for y in t["y"])
    notes = " ".join(a["text"] for a in fig["layout"]["annotations"]).replace("<br>", " ")
    assert "client CPU cycles (hardware counter), client instructions retired (hardware counter)" in notes
    assert no_pmu.split(": ", 1)[1] in notes
