"""A reading taken after the client's load ended (demuxlab.costs.teardown_in_reading): with no cooldown the
client closes every connection the moment the measure phase ends, before the launcher's end reading, and
over loopback each close with an echo in flight is a TCP reset in the namespace's counters. Read on this
VM's runs (issue 44's why panel, `cooldown_s: 0`): one reset sent per connection, 64 over a 3 s phase,
"1,663 per million messages", not the measure phase's. Such a count is unavailable with the reason; a run
whose cooldown outlasts the reading's lag keeps it. And the client's workers have ended by then: its context
switches, summed over the threads alive at the reading, were its main thread's alone (0.0004 per message
for a client that blocks about once per message); a side with ended threads has those sums unavailable."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from demuxlab.costs import UNAVAILABLE, run_costs
from demuxlab.ingest.record import prepare_record
from demuxlab.spec.expand import run_id_of

TEMPLATE = Path(__file__).parents[1] / "db" / "data" / "run_record.json"


def _side(lag_end: float) -> dict[str, Any]:
    """A side as the collector writes it (CONTRACTS.md §5), from a real run's: 64 resets at the end."""
    return {
        "pid": 9653,
        "cpus": [0],
        "interval_s": 3.0,
        "lag_s": [0.0037, lag_end],
        "process_cpu_s": {"user": 0.02, "sys": 0.6},
        "context_switches": {"voluntary": 1090, "involuntary": 433},
        "migrations": 0,
        "syscalls": 100_000,
        "tcp": {"RetransSegs": 0, "ListenOverflows": 0, "ListenDrops": 0, "OutRsts": 64, "TCPBacklogDrop": 0},
    }


def _by(costs: list[Any]) -> dict[str, Any]:
    return {c.metric: c for c in costs if c.side == "server"}


def test_resets_read_after_the_client_s_load_ended_are_unavailable_with_the_reason() -> None:
    late = _by(run_costs({"server": _side(0.0061)}, 12_800.0, cooldown_s=0.0))
    resets = late["tcp_resets"]
    assert resets.value is None and resets.per_message is None
    assert resets.unavailable is not None and resets.unavailable.startswith(UNAVAILABLE)
    assert "6.1 ms after the measure phase" in resets.unavailable and "teardown" in resets.unavailable
    # the rest of the side stands: retransmits, drops, the CPU and the system calls
    assert late["tcp_retransmits"].value == 0 and late["syscalls"].value == 100_000
    # a cooldown longer than the lag: the reading came while the client still loaded; the count is the phase's
    timely = _by(run_costs({"server": _side(0.0061)}, 12_800.0, cooldown_s=2.0))["tcp_resets"]
    assert timely.unavailable is None and timely.per_message == pytest.approx(64 / (12_800.0 * 3.0) * 1e6)
    # a record without the phases (a caller that does not say): as before
    assert _by(run_costs({"server": _side(0.0061)}, 12_800.0))["tcp_resets"].value == 64


def test_ingest_reads_the_cooldown_from_the_record_s_phases() -> None:
    record = json.loads(TEMPLATE.read_text())
    exp = record["experiment"]
    record["run_id"] = run_id_of(
        exp["name"], exp["spec_sha256"], record["point"]["point_key"], record["repeat"]
    )
    record["costs"] = {"phases": ["measure", "cooldown"], "server": _side(0.0061)}
    rows = {r["metric"]: r for r in prepare_record(copy.deepcopy(record)).cost_rows if r["side"] == "server"}
    assert record["phases"]["cooldown_s"] == 1 and rows["tcp_resets"]["value"] == 64
    record["phases"]["cooldown_s"] = 0
    rows = {r["metric"]: r for r in prepare_record(record).cost_rows if r["side"] == "server"}
    assert rows["tcp_resets"]["value"] is None and "teardown" in rows["tcp_resets"]["unavailable"]


def test_sums_over_threads_are_unavailable_where_some_ended_before_the_reading() -> None:
    side = _side(0.0061) | {
        "context_switches": {"voluntary": 30, "involuntary": 0},  # the main thread's: the worker's are gone
        "threads": [{"tid": 8592, "comm": "demux-client", "voluntary": 30, "wait_s": 0.1, "migrations": 0}],
        "threads_ended": 1,
    }
    rows = _by(run_costs({"server": side}, 12_800.0, cooldown_s=2.0))
    for metric in ("ctx_voluntary", "ctx_involuntary", "migrations", "threads_wait_s"):
        assert rows[metric].value is None, metric
        assert "1 of its threads ended before the end reading" in str(rows[metric].unavailable), metric
    # the process's own CPU time keeps its ended threads' (the kernel adds them to the process): it stands
    assert rows["cpu_sys_s"].value == 0.6 and rows["syscalls"].value == 100_000
    whole = _by(run_costs({"server": side | {"threads_ended": 0}}, 12_800.0, cooldown_s=2.0))
    assert whole["ctx_voluntary"].value == 30
