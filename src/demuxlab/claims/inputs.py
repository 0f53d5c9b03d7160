"""The claims' inputs as typed values: a measured point (its repeats summarized), its workload, and a model
prediction, each checked field by field from a plain row (the shapes are in :mod:`demuxlab.claims`).

Pure: mappings in, frozen dataclasses out; a missing or mistyped field is one clear error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from demuxlab.claims.estimates import Est, fmt_est
from demuxlab.errors import DemuxlabError


@dataclass(frozen=True)
class MeasuredPoint:
    """One measured point (the fields are described in :mod:`demuxlab.claims`): the sweep point's fields
    (:data:`demuxlab.point.POINT_FIELDS` but ``instrument``: calibration points are never claims' input,
    and ``client_threads`` may be unknown), then its measurement."""

    pattern: str
    notifier: str
    threads: int
    work_us: float
    connections: int
    msg_size: int
    mean: float
    ci_low: float | None
    ci_high: float | None
    n: int
    rate: float | None = None
    client_threads: int | None = None
    host: str = ""
    server_cpus: int | None = None
    cost_us: float | None = None
    cost_ci_low: float | None = None
    cost_ci_high: float | None = None
    point_key: str = ""
    # The server's costs in the kernel's terms (demuxlab.costs), means over the runs: system calls, system
    # CPU time (µs) and voluntary context switches per message; None where the runs do not say.
    syscalls_per_msg: float | None = None
    sys_us_per_msg: float | None = None
    switches_per_msg: float | None = None
    # Runs a validity check failed (demuxlab.validity): counted in the mean, named in the evidence.
    runs_flagged: int = 0
    flags: str = ""

    @property
    def design(self) -> str:
        return f"{self.pattern}/{self.notifier}"

    @property
    def label(self) -> str:
        return f"{self.pattern}/{self.notifier} t{self.threads}"

    @property
    def workload(self) -> Workload:
        return Workload(self.work_us, self.connections, self.msg_size, self.rate, self.client_threads)

    @property
    def est(self) -> Est:
        return Est(self.mean, self.ci_low, self.ci_high, self.n)

    @property
    def oversubscribed(self) -> bool:
        return self.server_cpus is not None and self.threads > self.server_cpus


@dataclass(frozen=True)
class Workload:
    work_us: float
    connections: int
    msg_size: int
    rate: float | None
    client_threads: int | None

    def __str__(self) -> str:
        load = "closed loop" if self.rate is None else f"open loop {self.rate:g} msg/s"
        return f"work {self.work_us:g} µs, {self.connections} conns, {self.msg_size} B, {load}"

    def sort_key(self) -> tuple[Any, ...]:
        return (self.work_us, self.connections, self.msg_size, self.rate or -1.0, self.client_threads or 0)


@dataclass(frozen=True)
class ModelPrediction:
    pattern: str
    notifier: str
    threads: int
    work_us: float
    connections: int
    source: str
    mean: float
    ci_halfwidth_rel: float | None = None
    msg_size: int | None = None
    rate: float | None = None
    host: str | None = None  # for that host (hardware class) only: a class's calibration; None: any host

    @property
    def est(self) -> Est:
        c = self.ci_halfwidth_rel or 0.0
        return Est(self.mean, self.mean * (1 - c), self.mean * (1 + c))

    def matches(self, p: MeasuredPoint) -> bool:
        return (
            (self.pattern, self.notifier, self.threads) == (p.pattern, p.notifier, p.threads)
            and math.isclose(self.work_us, p.work_us)
            and self.connections == p.connections
            and (self.msg_size is None or self.msg_size == p.msg_size)
            and (self.rate is None or (p.rate is not None and math.isclose(self.rate, p.rate)))
        )


_POINT_TYPES: dict[str, tuple[type, ...]] = {
    "pattern": (str,),
    "notifier": (str,),
    "threads": (int,),
    "work_us": (int, float),
    "connections": (int,),
    "msg_size": (int,),
    "mean": (int, float),
    "n": (int,),
}
_OPTIONAL_NUM = (
    "ci_low",
    "ci_high",
    "rate",
    "cost_us",
    "cost_ci_low",
    "cost_ci_high",
    "syscalls_per_msg",
    "sys_us_per_msg",
    "switches_per_msg",
)


def _bad(where: str, key: str, value: Any, want: str) -> DemuxlabError:
    return DemuxlabError(f"{where}: {key}: must be {want}, got {value!r}")


def as_point(row: Mapping[str, Any] | MeasuredPoint, where: str = "point") -> MeasuredPoint:
    """A :class:`MeasuredPoint` from a row; a missing or mistyped field is one clear error."""
    if isinstance(row, MeasuredPoint):
        return row
    if not isinstance(row, Mapping):
        raise DemuxlabError(f"{where}: must be a mapping, got {type(row).__name__}")
    values: dict[str, Any] = {}
    for key, types in _POINT_TYPES.items():
        v: Any = row.get(key)
        if v is None or isinstance(v, bool) or not isinstance(v, types):
            raise _bad(where, key, v, "a " + "/".join(t.__name__ for t in types))
        values[key] = float(cast(float, v)) if float in types else v
    if not math.isfinite(values["mean"]) or values["mean"] < 0:
        raise _bad(where, "mean", values["mean"], "a non-negative finite number")
    for key in _OPTIONAL_NUM:
        v = row.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)):
            raise _bad(where, key, v, "a finite number or None")
        values[key] = None if v is None else float(v)
    for key in ("client_threads", "server_cpus"):
        v = row.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise _bad(where, key, v, "an integer or None")
        values[key] = v
    flagged = row.get("runs_flagged", 0)
    if isinstance(flagged, bool) or not isinstance(flagged, int) or flagged < 0:
        raise _bad(where, "runs_flagged", flagged, "a non-negative integer")
    values["runs_flagged"] = flagged
    values["flags"] = str(row.get("flags") or "")
    values["host"] = str(row.get("host") or "")
    values["point_key"] = str(row.get("point_key") or "")
    return MeasuredPoint(**values)


def as_prediction(row: Mapping[str, Any] | ModelPrediction, where: str = "prediction") -> ModelPrediction:
    if isinstance(row, ModelPrediction):
        return row
    if not isinstance(row, Mapping):
        raise DemuxlabError(f"{where}: must be a mapping, got {type(row).__name__}")
    for key, types in (
        ("pattern", (str,)),
        ("notifier", (str,)),
        ("threads", (int,)),
        ("work_us", (int, float)),
        ("connections", (int,)),
        ("source", (str,)),
        ("mean", (int, float)),
    ):
        v = row.get(key)
        if v is None or isinstance(v, bool) or not isinstance(v, types):
            raise _bad(where, key, v, "a " + "/".join(t.__name__ for t in types))
    ci = row.get("ci_halfwidth_rel")
    if ci is not None and (not isinstance(ci, int | float) or ci < 0):
        raise _bad(where, "ci_halfwidth_rel", ci, "a non-negative number or None")
    return ModelPrediction(
        pattern=row["pattern"],
        notifier=row["notifier"],
        threads=row["threads"],
        work_us=float(row["work_us"]),
        connections=row["connections"],
        source=row["source"],
        mean=float(row["mean"]),
        ci_halfwidth_rel=None if ci is None else float(ci),
        msg_size=row.get("msg_size"),
        rate=None if row.get("rate") is None else float(row["rate"]),
        host=str(row["host"]) if row.get("host") else None,
    )


def describe(p: MeasuredPoint) -> str:
    """A point in the evidence: its mean and interval, its runs, and those a validity check flagged."""
    flagged = f", {p.runs_flagged} of {p.n} runs flagged ({p.flags})" if p.runs_flagged else ""
    return f"{p.label}: {fmt_est(p.est)}, n={p.n}{flagged}"


def kernel_costs(p: MeasuredPoint) -> str | None:
    """What a message cost the server in the kernel's terms, where its runs say (demuxlab.costs)."""
    bits = []
    if p.syscalls_per_msg is not None:
        bits.append(f"{p.syscalls_per_msg:.2f} system calls")
    if p.sys_us_per_msg is not None:
        bits.append(f"{p.sys_us_per_msg:.2f} µs system CPU")
    if p.switches_per_msg is not None:
        bits.append(f"{p.switches_per_msg:.2f} voluntary switches")
    return f"{p.label}: {', '.join(bits)} per message" if bits else None
