"""What the policy knows of a finished run (:class:`Observed`), read from a run record (CONTRACTS.md §5),
and the summary of a point's runs.

Pure: record documents in, values out. A record that lacks what the policy reads is one line naming the
record and the field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from demuxlab.errors import DemuxlabError
from demuxlab.point import Point
from demuxlab.stats import Summary, point_summary
from demuxlab.steady import first_stop
from demuxlab.validation.calibration import pinned_us
from demuxlab.vocab import RUN_OK


@dataclass(frozen=True)
class Observed:
    """One finished run of a point, as the policy sees it."""

    point: Point
    repeat: int
    ok: bool
    throughput: float | None  # msg/s of the measured seconds (steady-state mean); None when failed
    warmup_s: float
    measured_s: float  # seconds of the measure phase it ran (less than the spec's when it stopped early)
    cooldown_s: float
    host: str  # the server host (a cluster run: its hardware class), as the claims group points
    server_cpus: int | None
    per_second: tuple[float, ...] = ()
    steady: Mapping[str, Any] | None = None  # the run's steady_stop decision, when it had the rule
    source: str = ""  # the record it came from
    server_result: Mapping[str, Any] | None = None  # the server's exit JSON (calibration runs' timings)
    run_id: str = ""
    client_result: Mapping[str, Any] | None = None  # the client's JSON (the models' client turnaround)
    client_cpus: int | None = None  # CPUs the client was pinned to
    wake_us: float | None = None  # the client's wake-up cost measured beside the run (pinning.wake_us)
    handoff_us: float | None = None  # a lock's hand-off measured beside it (pinning.handoff_us)

    @property
    def run_s(self) -> float:
        """Seconds of the run's phases: what it cost of the host pair."""
        return self.warmup_s + self.measured_s + self.cooldown_s


def _get(doc: Mapping[str, Any], path: str, source: str) -> Any:
    node: Any = doc
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise DemuxlabError(f"{source}: field {path}: missing")
        node = node[part]
    return node


def _number(value: Any, field: str, source: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DemuxlabError(f"{source}: field {field}: expected a number, got {value!r}")
    return float(value)


def observe(record: Mapping[str, Any], source: str) -> Observed:
    """The run a record describes (``source``: the record's file, for the errors)."""
    if not isinstance(record, Mapping):
        raise DemuxlabError(f"{source}: not a run record (expected a JSON object)")
    try:
        point = Point.from_json(_get(record, "point", source))
    except (KeyError, TypeError, ValueError) as exc:
        raise DemuxlabError(f"{source}: field point: not a sweep point ({exc})") from None
    key = _get(record, "point.point_key", source)
    if key != point.point_key:
        raise DemuxlabError(
            f"{source}: field point.point_key: {key!r} is not its fields' key {point.point_key!r}"
        )
    repeat = _get(record, "repeat", source)
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 0:
        raise DemuxlabError(f"{source}: field repeat: expected a non-negative integer, got {repeat!r}")
    phases = _get(record, "phases", source)
    warmup = _number(_get(phases, "warmup_s", source), "phases.warmup_s", source)
    measure = _number(_get(phases, "measure_s", source), "phases.measure_s", source)
    cooldown = _number(_get(phases, "cooldown_s", source), "phases.cooldown_s", source)
    ok = record.get("status") == RUN_OK
    client = record.get("client") if isinstance(record.get("client"), Mapping) else {}
    assert isinstance(client, Mapping)
    per_second: tuple[float, ...] = ()
    raw = client.get("per_second")
    if isinstance(raw, list):
        per_second = tuple(_number(v, "client.per_second", source) for v in raw)
    measured = measure
    if ok and client.get("duration_s") is not None:
        measured = min(measure, _number(client["duration_s"], "client.duration_s", source))
    throughput = None
    if ok:
        throughput = _number(
            _get(record, "stats.throughput_msgs_per_s", source), "stats.throughput_msgs_per_s", source
        )
    hosts = record.get("hosts") if isinstance(record.get("hosts"), Mapping) else {}
    assert isinstance(hosts, Mapping)
    server = hosts.get("server") if isinstance(hosts.get("server"), Mapping) else {}
    assert isinstance(server, Mapping)
    pair = record.get("pair") if isinstance(record.get("pair"), Mapping) else {}
    assert isinstance(pair, Mapping)
    cls = (
        pair.get("hardware_class", {}).get("id") if isinstance(pair.get("hardware_class"), Mapping) else None
    )
    host = str(cls or server.get("hostname") or "")
    pinning = record.get("pinning") if isinstance(record.get("pinning"), Mapping) else {}
    assert isinstance(pinning, Mapping)
    cpus = pinning.get("server_cpus")
    client_cpus = pinning.get("client_cpus")
    steady = record.get("steady_stop")
    server_result = record.get("server")
    return Observed(
        point=point,
        repeat=repeat,
        ok=ok,
        throughput=throughput,
        warmup_s=warmup,
        measured_s=measured,
        cooldown_s=cooldown,
        host=host,
        server_cpus=len(cpus) if isinstance(cpus, list) and cpus else None,
        per_second=per_second,
        steady=steady if isinstance(steady, Mapping) else None,
        source=source,
        server_result=server_result if isinstance(server_result, Mapping) else None,
        run_id=str(record.get("run_id") or ""),
        client_result=client if client else None,
        client_cpus=len(client_cpus) if isinstance(client_cpus, list) and client_cpus else None,
        wake_us=pinned_us(pinning, "wake_us"),
        handoff_us=pinned_us(pinning, "handoff_us"),
    )


def stopped_when_steady(run: Observed, min_s: float, target_rel: float) -> Observed:
    """The run as it would have been with the steady rule: measured up to the first second at which its
    samples were steady (:func:`demuxlab.steady.first_stop`), its throughput the steady-state mean of
    those seconds. A run that had the rule already (its record says so), a failed run, or one without
    per-second samples is returned as it is."""
    if run.steady is not None or not run.ok or not run.per_second:
        return run
    from demuxlab.stats import steady_state

    decision = first_stop(run.per_second, min_s, target_rel)
    if not decision.stop or decision.seconds >= len(run.per_second):
        return replace(run, steady=decision.to_json(min_s, target_rel, run.measured_s))
    kept = run.per_second[: decision.seconds]
    return replace(
        run,
        throughput=steady_state(kept).throughput,
        measured_s=float(decision.seconds),
        per_second=kept,
        steady=decision.to_json(min_s, target_rel, run.measured_s),
    )


def summarize(runs: Sequence[Observed]) -> Summary | None:
    """Mean and 95 % interval of a point's successful runs (None without any)."""
    values = [r.throughput for r in runs if r.ok and r.throughput is not None]
    return point_summary(values) if values else None
