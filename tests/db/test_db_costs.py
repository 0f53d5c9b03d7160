"""A run's costs and validity checks through the database (real PostgreSQL, issue 44): ingest derives
``run_costs`` (every side's every metric: delta, per message, or unavailable: why) and ``run_checks`` from
the record and marks the run ``flagged``; points.csv counts a point's flagged runs, checks.csv each check's
verdicts and the experiment's order effect; the claims' inputs carry the kernel's costs and the flags; a
record whose costs are not counters is refused in one line; re-ingesting is a no-op."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, select

from demuxlab.costs import METRICS
from demuxlab.db.models import Run, RunCheck, RunCost
from demuxlab.errors import DemuxlabError
from demuxlab.ingest import ingest_files
from demuxlab.report import check_summary, load_rows, summarize

pytestmark = pytest.mark.postgres

MakeRecord = Callable[..., dict[str, Any]]
NO_PMU = "unavailable: no hardware performance counters (perf_event_open: No such file or directory)"
WriteRecord = Callable[[dict[str, Any]], Path]


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    eng = create_engine(database_url)
    yield eng
    eng.dispose()


def _side(syscalls: Any, pid: int, cpus: list[int], governor: str) -> dict[str, Any]:
    return {
        "pid": pid,
        "cpus": cpus,
        "interval_s": 3.0,
        "lag_s": [0.001, 0.002],
        "process_cpu_s": {"user": 0.3, "sys": 1.5},
        "context_switches": {"voluntary": 30_000, "involuntary": 600},
        "migrations": 12,
        "syscalls": syscalls,
        "syscalls_source": "kernel: perf counter on the raw_syscalls:sys_enter tracepoint, per thread",
        "threads": [{"tid": pid, "comm": "demux-server", "cpus": "0", "voluntary": 30_000, "syscalls": 1}],
        "threads_ended": 0,
        "cpu_time_s": {
            "user": 0.4,
            "nice": 0.0,
            "system": 1.6,
            "idle": 0.9,
            "iowait": 0.0,
            "irq": 0.0,
            "softirq": 0.2,
            "steal": 0.0,
        },
        "tcp": {"RetransSegs": 0, "ListenOverflows": 0, "ListenDrops": 0, "OutRsts": 0},
        "netns": "net:[4026531833]",
        "frequency_khz": "unavailable: /sys/devices/system/cpu/cpu0/cpufreq absent: no cpufreq driver",
        "governor": governor,
        "turbo": "unavailable: neither intel_pstate/no_turbo nor cpufreq/boost",
        "smt": {"active": False, "control": "notsupported"},
        "energy_uj": "unavailable: no RAPL zone under /sys/class/powercap",
        "cycles": NO_PMU,
        "instructions": NO_PMU,
    }


def with_costs(
    record: dict[str, Any], *, on_one_core: bool = False, facts_governor: str | None = None
) -> dict[str, Any]:
    """The template's run with the kernel's counters a run reads, measured on one host without a cpufreq
    driver; its facts name ``facts_governor`` (read elsewhere, e.g. outside the run's container)."""
    record = copy.deepcopy(record)
    record["hosts"]["server"]["governor"] = facts_governor
    record["hosts"]["client"] = record["hosts"]["server"]
    # The template's host: CPUs 0, 1 on NUMA node 0, CPUs 2, 3 on node 1, a core each.
    record["pinning"].update(same_host=True, server_cpus=[2, 3], client_cpus=[2 if on_one_core else 0])
    gov = "unavailable: /sys/devices/system/cpu/cpu1/cpufreq absent: no cpufreq driver"
    record["costs"] = {
        "phases": ["measure", "cooldown"],
        "server": _side(120_000, 100, [2, 3], gov),
        "client": _side(90_000, 200, [0], gov),
        "same_netns": True,
    }
    # A host with a PMU counts the server's cycles and instructions; this VM's has none (the client's).
    record["costs"]["server"].update(cycles=6_000_000_000, instructions=9_000_000_000)
    return record


def test_costs_and_checks_are_stored_and_a_failed_check_flags_the_run(
    engine: Engine, make_record: MakeRecord, write_record: WriteRecord, database_url: str
) -> None:
    plain = with_costs(make_record(repeat=0))
    crowded = with_costs(make_record(repeat=1), on_one_core=True, facts_governor="performance")
    ingest_files([write_record(plain), write_record(crowded)], engine=engine)
    throughput = plain["stats"]["throughput_msgs_per_s"]
    with engine.connect() as conn:
        costs = {
            (str(r.run_id), r.side, r.metric): r
            for r in conn.execute(
                select(
                    RunCost.run_id,
                    RunCost.side,
                    RunCost.metric,
                    RunCost.value,
                    RunCost.per_message,
                    RunCost.unavailable,
                )
            )
        }
        checks = {(str(r.run_id), r.check): r for r in conn.execute(select(RunCheck))}
        flags = {str(r.run_id): r.flagged for r in conn.execute(select(Run.run_id, Run.flagged))}
        stored = conn.execute(select(Run.costs).where(Run.run_id == plain["run_id"])).scalar_one()
    assert stored == plain["costs"]  # the record's member as is
    assert len(costs) == 2 * 2 * len(METRICS)  # two runs, two sides, every metric
    calls = costs[plain["run_id"], "server", "syscalls"]
    assert calls.value == 120_000 and calls.per_message == pytest.approx(120_000 / (throughput * 3.0))
    cycles = costs[plain["run_id"], "server", "cycles"]
    assert cycles.value == 6e9 and cycles.per_message == pytest.approx(6e9 / (throughput * 3.0))
    assert costs[plain["run_id"], "server", "instructions"].per_message == pytest.approx(
        9e9 / (throughput * 3)
    )
    no_pmu = costs[plain["run_id"], "client", "cycles"]
    assert (no_pmu.value, no_pmu.per_message, no_pmu.unavailable) == (None, None, NO_PMU)
    energy = costs[plain["run_id"], "server", "energy_uj"]
    assert (energy.value, energy.per_message) == (None, None) and energy.unavailable.startswith(
        "unavailable: no RAPL"
    )
    assert checks[crowded["run_id"], "placement.core"].verdict == "fail"
    assert checks[plain["run_id"], "placement.core"].verdict == "pass"
    assert checks[plain["run_id"], "cpu.governor"].verdict == "unknown"
    assert "cpufreq absent" in checks[plain["run_id"], "cpu.governor"].reason
    # The costs could not read the governor; the host's facts say performance: they decide, and say so.
    assert checks[crowded["run_id"], "cpu.governor"].verdict == "pass"
    assert (
        "from the host's facts; the run's costs: unavailable:"
        in checks[crowded["run_id"], "cpu.governor"].reason
    )
    assert flags == {plain["run_id"]: False, crowded["run_id"]: True}

    # points.csv: the flagged run stays in the point's mean, and is counted with the check that flagged it.
    points = load_rows(plain["experiment"]["name"], plain["experiment"]["spec_sha256"], database_url)
    (row,) = summarize(points)
    assert (
        row["runs_ok"] == 2
        and row["runs_flagged"] == 1
        and row["flags"] == "placement.core:1 placement.numa:1"
    )
    by_check = {r["check"]: r for r in check_summary(points)}
    assert by_check["placement.core"]["fail"] == 1 and by_check["placement.core"]["pass"] == 1
    assert by_check["order"]["verdict"] == "unknown"  # two runs: too few for an order test

    # The claims read the kernel's costs and the flags of the point.
    from demuxlab.claims.db import load_inputs

    inputs = load_inputs(plain["experiment"]["name"], plain["experiment"]["spec_sha256"], url=database_url)
    (point,) = inputs.points
    # One format for a point's flags (CONTRACTS.md §7): the claims' inputs write points.csv's.
    assert (
        point["runs_flagged"] == 1 and point["flags"] == row["flags"] == "placement.core:1 placement.numa:1"
    )
    assert point["syscalls_per_msg"] == pytest.approx(120_000 / (throughput * 3.0))
    from demuxlab.claims import as_point
    from demuxlab.claims.inputs import describe

    assert "1 of 2 runs flagged (placement.core:1 placement.numa:1)" in describe(as_point(point))

    # Ingesting the same records again changes nothing.
    again = ingest_files([write_record(plain), write_record(crowded)], engine=engine)
    assert {r.outcome for r in again} == {"unchanged"}


def test_a_record_whose_costs_are_not_counters_is_refused_naming_the_field(
    engine: Engine, make_record: MakeRecord, write_record: WriteRecord
) -> None:
    for key, value in (
        ("syscalls", -3),
        ("syscalls", "n/a"),
        ("syscalls", 1.5),
        ("cycles", -3),
        ("instructions", "n/a"),
        ("cycles", 0.5),
    ):
        needle = "costs.server"
        bad = with_costs(make_record())
        bad["costs"]["server"][key] = value
        with pytest.raises(DemuxlabError, match=r"field costs\.server") as err:
            ingest_files([write_record(bad)], engine=engine)
        assert needle in str(err.value) and "\n" not in str(err.value)
    gaps = make_record()
    gaps["client"]["gap_bins"] = [1, 2, 3]
    with pytest.raises(DemuxlabError, match=r"field client\.gap_bins"):
        ingest_files([write_record(gaps)], engine=engine)


def test_a_record_without_costs_has_no_cost_rows_and_is_still_checked(
    engine: Engine, make_record: MakeRecord, write_record: WriteRecord
) -> None:
    record = make_record()
    ingest_files([write_record(record)], engine=engine)
    with engine.connect() as conn:
        assert conn.execute(select(RunCost)).all() == []
        verdicts = {r.check: r.verdict for r in conn.execute(select(RunCheck))}
        flagged = conn.execute(select(Run.flagged)).scalar_one()
    assert verdicts["placement.core"] == "pass"  # two hosts
    assert flagged is False


# Dash 4 warns that its DataTable will move out of the package one day; the pages use it as it is.
@pytest.mark.filterwarnings("ignore::DeprecationWarning:dash.development.base_component")
def test_the_run_page_s_why_panel_and_the_sweep_s_cost_axis_read_them(
    engine: Engine, make_record: MakeRecord, write_record: WriteRecord, database_url: str
) -> None:
    """The dashboard in process: the Run page's "why" says the crowded run is flagged and by which check,
    lists every check with its reason and every cost per side (an unavailable one with its reason, never a
    zero); a run without costs says so; the Sweep's cost axis draws each point's mean of its runs."""
    import json

    from demuxlab.dashboard import common
    from demuxlab.dashboard.app import create_app

    plain, crowded = with_costs(make_record(repeat=0)), with_costs(make_record(repeat=1), on_one_core=True)
    bare = make_record(repeat=2)
    ingest_files([write_record(r) for r in (plain, crowded, bare)], engine=engine)
    create_app(database_url)
    from demuxlab.dashboard import why
    from demuxlab.dashboard.pages import run as run_page

    def shown(component: Any) -> str:
        return json.dumps(component, default=lambda c: c.to_plotly_json())

    calls = 120_000 / (crowded["stats"]["throughput_msgs_per_s"] * 3.0)
    try:
        page = shown(run_page.layout(run=crowded["run_id"]))
        assert '"run-why"' in page and "FLAGGED: placement.core, placement.numa failed" in page
        for needle in ("independence", "cpu.governor", "calls/msg", "unavailable: no RAPL zone", NO_PMU):
            assert needle in page, needle
        assert f"{calls:.2f}" in page  # the table's system calls per message
        # per thread: its voluntary switches per message of the run (30,000 over the phase's messages)
        assert '"run-why-threads"' in page and "voluntary switches /msg" in page
        switches = 30_000 / (crowded["stats"]["throughput_msgs_per_s"] * 3.0)
        assert f"{switches:.2f}" in page or f"{switches:.3g}" in page
        assert "Not flagged" in shown(why.run_panel(plain["run_id"]))
        none = shown(why.run_panel(bare["run_id"]))
        assert "no costs recorded for this run" in none and "Not flagged" in none
        assert "run-why-threads" not in none  # no threads: no table
        name = plain["experiment"]["name"]
        fig = why.sweep_cost(name, "threads", None, None, "syscalls", "server")
        (line,) = [t for t in fig["data"] if t["mode"] == "lines+markers"]
        assert line["y"] == [pytest.approx(calls)] and line["x"] == [plain["point"]["threads"]]
        energy = why.sweep_cost(name, "threads", None, None, "energy_uj", "server")
        assert "unavailable: no RAPL zone" in json.dumps(energy)
        cycles_axis = why.sweep_cost(name, "threads", None, None, "cycles", "server")
        (line,) = [t for t in cycles_axis["data"] if t["mode"] == "lines+markers"]
        assert line["y"] == [pytest.approx(6e9 / (plain["stats"]["throughput_msgs_per_s"] * 3.0))]
        assert NO_PMU in json.dumps(why.sweep_cost(name, "threads", None, None, "cycles", "client"))
    finally:
        common.store().dispose()
