"""The self-check of a calibration (calibrate.py): the fitted model, solved by the SSA at the calibration
points' own settings (work, connections, threads, cores, client), against what their runs measured — the
plain runs of the points where there are some (issue 43: the figure a prediction is compared with), else the
instrumented runs — and the refusal where it misses them by more than :data:`SELF_CHECK_TOLERANCE`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from demuxlab.ctmc.fit_plain import PlainRun
from demuxlab.ctmc.fit_runs import CalibrationRefused, Workload, _work_spun_us, _workload
from demuxlab.ctmc.rates import Host, Rates, calibration_threads
from demuxlab.errors import DemuxlabError

SELF_CHECK_TOLERANCE = 0.10  # |model − measured| / measured on the calibration point's own runs
SELF_CHECK_REL_CI = 0.01
PLAIN = "plain"  # SelfCheck.against: the plain runs of the calibration points
INSTRUMENTED = "instrumented"  # …or, where a workload has none, its instrumented runs


@dataclass(frozen=True)
class SelfCheck:
    """The fitted model against the calibration runs of one workload (work, connections): the plain runs of
    its points where it has some (``against`` ``plain``), else its instrumented runs."""

    work_us: float  # nominal (--work-us)
    work_measured_us: float  # the runs' mean `work` op (0 without work)
    connections: int
    threads: int
    runs: int
    measured_msgs_per_s: float
    predicted_msgs_per_s: float
    cores: int | None = None
    against: str = INSTRUMENTED

    @property
    def rel_error(self) -> float:
        return (self.predicted_msgs_per_s - self.measured_msgs_per_s) / self.measured_msgs_per_s

    def as_dict(self) -> dict[str, Any]:
        return {
            "work_us": self.work_us,
            "work_measured_us": self.work_measured_us,
            "connections": self.connections,
            "threads": self.threads,
            "cores": self.cores,
            "runs": self.runs,
            "measured_msgs_per_s": self.measured_msgs_per_s,
            "predicted_msgs_per_s": self.predicted_msgs_per_s,
            "rel_error": self.rel_error,
            "against": self.against,
        }


@dataclass(frozen=True)
class _Settings:
    """What a calibration takes besides the instrumented runs: the host's wake-ups, the plain runs of the
    same points, and the parts left out (an ablation)."""

    wake_us: float | None = None
    handoff_us: float | None = None
    plain: tuple[PlainRun, ...] = ()
    off: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class _Check:
    """Runs the self-check judges against, and what they are (:data:`PLAIN` or :data:`INSTRUMENTED`)."""

    results: list[dict[str, Any]]
    measured: list[float | None]
    connections: list[int | None] | None
    clients: list[dict[str, Any] | None] | None
    client_cores: list[int | None] | None
    against: str

    @classmethod
    def of(
        cls,
        server_results: Sequence[dict[str, Any]],
        measured: Sequence[float | None] | None,
        connections: Sequence[int | None] | None,
        clients: Sequence[dict[str, Any] | None] | None,
        client_cores: Sequence[int | None] | None,
        settings: _Settings,
    ) -> list[_Check]:
        """The plain runs with a measurement, and the instrumented ones with one at a work value no plain run
        has (a calibration point without plain runs is judged on its own instrumented runs)."""
        plain = [r for r in settings.plain if r.measured is not None]
        out = []
        if plain:
            out.append(
                cls(
                    [r.server for r in plain], [r.measured for r in plain], [r.connections for r in plain],
                    [r.client for r in plain] if clients is not None else None,
                    [r.client_cores for r in plain], PLAIN,
                )
            )  # fmt: skip
        if measured is not None:
            works = {_work_spun_us(r.server) for r in plain}
            idx = [i for i, res in enumerate(server_results) if _work_spun_us(res) not in works]

            def pick(seq: Sequence[Any] | None) -> list[Any] | None:
                return None if seq is None else [seq[i] for i in idx]

            got = cls(
                [server_results[i] for i in idx], [measured[i] for i in idx], pick(connections),
                pick(clients), pick(client_cores), INSTRUMENTED,
            )  # fmt: skip
            if got.results:
                out.append(got)
        return out


def _self_checked(
    rates: Rates,
    pattern: str,
    runs: Sequence[_Check],
    checks: list[SelfCheck] | None,
    what: str,
    speed: float,
) -> None:
    """The self-check: refuse the rates where the model misses the calibration point's runs by more than
    :data:`SELF_CHECK_TOLERANCE`; the comparisons into ``checks``."""
    got: list[SelfCheck] = []
    for c in runs:
        got += self_check(
            rates, pattern, c.results, c.measured, c.connections, clients=c.clients,
            client_cores=c.client_cores, against=c.against,
        )  # fmt: skip
    if checks is not None:
        checks[:] = got
    worst = max(got, key=lambda c: abs(c.rel_error), default=None)
    if worst is not None and abs(worst.rel_error) > SELF_CHECK_TOLERANCE:
        whose = (
            "the plain runs of their calibration point" if worst.against == PLAIN else "their own calibration"
        )
        raise CalibrationRefused(
            f"{what}: refused: the fitted rates predict {worst.predicted_msgs_per_s:,.0f} msg/s for "
            f"{whose} run(s) at {worst.work_us:g} µs work, {worst.connections} "
            f"connections, {worst.threads} threads on {worst.cores or 'a core each'} core(s), measured "
            f"{worst.measured_msgs_per_s:,.0f} msg/s ({worst.rel_error:+.1%}; the limit is "
            f"±{SELF_CHECK_TOLERANCE:.0%}; the server had {speed:.0%} of its CPUs)"
        )


def self_check(
    rates: Rates,
    pattern: str,
    server_results: Sequence[dict[str, Any]],
    measured: Sequence[float | None],
    connections: Sequence[int | None] | None = None,
    *,
    rel_ci: float = SELF_CHECK_REL_CI,
    clients: Sequence[dict[str, Any] | None] | None = None,
    client_cores: Sequence[int | None] | None = None,
    against: str = INSTRUMENTED,
) -> list[SelfCheck]:
    """The model (SSA) with ``rates`` at each workload (work, connections, cores, client) of the
    calibration runs (``against``: which runs they are, :data:`PLAIN` or :data:`INSTRUMENTED`), against the
    mean measured throughput of its runs. Runs without a measurement are left out. Work is the nominal
    ``work_us`` (the fitted ``speed`` slows it as it slows every step); ``work_measured_us`` reports the
    runs' mean spin."""
    from demuxlab.ctmc.predict import predict

    if len(measured) != len(server_results) or (
        connections is not None and len(connections) != len(measured)
    ):
        raise DemuxlabError("calibrate: measured/connections and server results differ in number")
    groups: dict[Workload, list[tuple[float, float]]] = {}
    for i, res in enumerate(server_results):
        m = measured[i]
        where = _workload(pattern, i, res, connections, clients, client_cores)
        if m is None or where is None:
            continue
        if not isinstance(m, int | float) or not m > 0:
            raise DemuxlabError(f"calibrate {pattern}: measured throughput #{i} must be positive, got {m!r}")
        groups.setdefault(where, []).append((float(m), _work_spun_us(res)))
    threads = calibration_threads(pattern)
    out: list[SelfCheck] = []
    for (work, conns, cores, cthreads, ccores), runs in sorted(groups.items(), key=lambda kv: str(kv[0])):
        host = Host(cores=cores, client_threads=cthreads if rates.has_client else None, client_cores=ccores)
        p = predict(
            pattern, threads, work, method="ssa", connections=conns, rates=rates, rel_ci=rel_ci, host=host
        )
        mean = sum(m for m, _ in runs) / len(runs)
        spun = sum(s for _, s in runs) / len(runs)
        out.append(
            SelfCheck(work, spun, conns, threads, len(runs), mean, p.throughput_msgs_per_s, cores, against)
        )
    return out
