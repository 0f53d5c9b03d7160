"""Calibration of the CTMC rates from an experiment's instrumented runs (seed 001 §V-A), as plain values.

Pure: the calibration runs in (:class:`CalibrationRun`, read from the database by
:mod:`demuxlab.validation.db`), a :class:`Fit` out (the fitted rates and the outcome the workflow records);
storing the rates and writing ``calibrations.json`` are the outer modules' part. Also here: the document
``calibrate-experiment`` writes and ``predict-experiment`` reads back, and the line the command prints per
outcome.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from demuxlab.ctmc.rates import Rates
from demuxlab.errors import DemuxlabError

# A calibration's key: (pattern, notifier, hardware class); the class is None for a local sweep.
CalibrationKey = tuple[str, str, str | None]


@dataclass(frozen=True)
class CalibrationRun:
    """What the fit reads of one successful calibration run."""

    run_id: str
    server_result: dict[str, Any]  # the server's exit JSON, with its per-operation timings
    throughput_msgs_per_s: float | None
    connections: int
    server_host_id: int | None
    server_artifact: Any
    launcher: str
    client_result: dict[str, Any] | None = None  # the client's JSON (its CPU per message: r_z)
    client_cores: int | None = None  # the CPUs the client was pinned to (None: one per client thread)
    wake_us: float | None = None  # ω measured beside the run (its pinning's wake_us; None: not measured)
    handoff_us: float | None = None  # a lock's hand-off measured beside it (pinning.handoff_us)


@dataclass(frozen=True)
class PlainCalibrationRun:
    """A successful uninstrumented run of a calibration point's setting (the same pattern, notifier, threads,
    work, connections, size and client; issue 43): what the server did without the instrumentation, whose
    CPU per message and throughput the calibration takes (:mod:`demuxlab.ctmc.fit_plain`)."""

    run_id: str
    server_result: dict[str, Any]
    throughput_msgs_per_s: float | None
    connections: int
    client_result: dict[str, Any] | None = None
    client_cores: int | None = None


def pinned_us(pinning: Any, field: str) -> float | None:
    """A wake-up measured beside a run, µs (demuxlab.launch.wake): its record's ``pinning.wake_us`` (the
    client's ω) or ``pinning.handoff_us`` (a lock's hand-off); None where it was not measured."""
    got = pinning.get(field) if isinstance(pinning, Mapping) else None
    if not isinstance(got, int | float) or isinstance(got, bool) or not math.isfinite(got) or got < 0:
        return None
    return float(got)


@dataclass(frozen=True)
class CalibrationOutcome:
    pattern: str
    notifier: str
    calibration_id: int | None
    rates: dict[str, float] | None
    rate_sources: dict[str, str] | None
    source_runs: list[str]
    failed_runs: int
    error: str | None
    self_check: tuple[dict[str, Any], ...] = ()  # SelfCheck.as_dict() per workload, refused ones too
    hardware_class: str | None = None  # the class of its runs (None: a local sweep)
    plain_runs: tuple[str, ...] = ()  # the plain runs of its points it took the speed and self-check from

    @property
    def status(self) -> str:
        """``fitted``; ``refused`` (the fit or its self-check said no: ``error`` says why, with the figure);
        ``no runs`` (no successful calibration run)."""
        return "fitted" if self.error is None else refusal_status(self.source_runs, self.error)

    @property
    def self_check_worst(self) -> dict[str, Any] | None:
        """The self-check comparison furthest from its measurement (refused or not), if any was made."""
        checks = [c for c in self.self_check if isinstance(c.get("rel_error"), int | float)]
        return max(checks, key=lambda c: abs(c["rel_error"]), default=None)

    def to_json(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "notifier": self.notifier,
            "hardware_class": self.hardware_class,
            "calibration_id": self.calibration_id,
            "rates_per_us": self.rates,
            "rate_sources": self.rate_sources,
            "source_runs": self.source_runs,
            "failed_runs": self.failed_runs,
            "error": self.error,
            "self_check": list(self.self_check),
            # issue 43: every design calibrated or its refusal shown with its reason and self-check figure
            "status": self.status,
            "self_check_worst": self.self_check_worst,
            "plain_runs": list(self.plain_runs),
        }

    @property
    def message(self) -> str:
        """The line ``calibrate-experiment`` prints for this outcome."""
        what = f"{self.pattern}/{self.notifier}" + (
            f" on class {self.hardware_class}" if self.hardware_class else ""
        )
        if self.error:
            return f"calibration {what}: not fitted: {self.error}"
        return f"calibration {what}: id {self.calibration_id} from {len(self.source_runs)} runs"


@dataclass(frozen=True)
class Fit:
    """A fitted calibration, not yet stored (``outcome.calibration_id`` is None), or one that could not be
    fitted (``rates`` None, ``outcome.error`` says why)."""

    outcome: CalibrationOutcome
    rates: Rates | None = None
    host_id: int | None = None  # the server host of every run, if they share one
    artifacts: dict[str, Any] = field(default_factory=dict)

    def stored(self, calibration_id: int) -> CalibrationOutcome:
        """The outcome once the rates are stored as ``calibration_id``."""
        return replace(self.outcome, calibration_id=calibration_id)


def calibration_keys(
    wanted: Iterable[tuple[str, str]], seen: Iterable[CalibrationKey]
) -> list[CalibrationKey]:
    """One key per wanted (pattern, notifier) and hardware class its calibration runs ran on (``seen``: the
    keys of every run, ok or failed); a pair without runs gets one key with no class."""
    seen = list(seen)
    keys: list[CalibrationKey] = []
    for pattern, notifier in sorted(set(wanted)):
        classes = {c for (p, n, c) in seen if (p, n) == (pattern, notifier)} or {None}
        keys.extend((pattern, notifier, c) for c in sorted(classes, key=lambda c: c or ""))
    return keys


def fit_calibration(
    key: CalibrationKey,
    runs: Sequence[CalibrationRun],
    failed: int,
    experiment: str,
    spec_sha256: str,
    plain: Sequence[PlainCalibrationRun] = (),
) -> Fit:
    """Fit ``key``'s rates from its successful calibration runs (``failed``: how many of its runs failed)
    and the plain runs of the same points (``plain``: the speed and the self-check's measurement, where the
    spec measured those points too).

    A pair with no successful run, or whose fit :func:`demuxlab.ctmc.calibrate.calibrate` refuses, is an
    outcome with the reason, not an error."""
    from demuxlab.ctmc.calibrate import PlainRun, SelfCheck, calibrate

    pattern, notifier, cls = key
    ids = [r.run_id for r in runs]
    if not runs:
        error = f"no successful calibration run ({failed} failed)"
        return Fit(
            CalibrationOutcome(pattern, notifier, None, None, None, ids, failed, error, hardware_class=cls)
        )
    checks: list[SelfCheck] = []
    plain_ids = tuple(r.run_id for r in plain)
    omegas = [r.wake_us for r in runs if r.wake_us is not None]
    handoffs = [r.handoff_us for r in runs if r.handoff_us is not None]
    try:
        rates = calibrate(
            [r.server_result for r in runs],
            pattern,
            [f"run {i}" for i in ids],
            measured=[r.throughput_msgs_per_s for r in runs],
            connections=[r.connections for r in runs],
            checks=checks,
            clients=[r.client_result for r in runs],
            client_cores=[r.client_cores for r in runs],
            # The client's wake-up of a sleeping dispatcher: the median of what was measured beside the
            # runs (none on two hosts: the calibration then charges no wake-up).
            wake_us=statistics.median(omegas) if omegas else None,
            # A lock's hand-off to a sleeping waiter, likewise (none on two hosts: not measured there).
            handoff_us=statistics.median(handoffs) if handoffs else None,
            plain=[
                PlainRun(
                    r.server_result, r.throughput_msgs_per_s, r.client_result, r.client_cores, r.connections
                )
                for r in plain
            ],
        )
    except DemuxlabError as exc:
        done = tuple(c.as_dict() for c in checks)
        return Fit(
            CalibrationOutcome(
                pattern, notifier, None, None, None, ids, failed, exc.message, done, cls, plain_ids
            )
        )
    hosts = {r.server_host_id for r in runs}
    artifacts = {
        "experiment": experiment,
        "spec_sha256": spec_sha256,
        "server_artifacts": _unique([r.server_artifact for r in runs]),
        "launchers": sorted({r.launcher for r in runs}),
        "self_check": [c.as_dict() for c in checks],
        "plain_runs": list(plain_ids),
        **({"hardware_class": cls} if cls is not None else {}),
    }
    outcome = CalibrationOutcome(
        pattern,
        notifier,
        None,
        rates.as_dict(),
        dict(rates.source),
        ids,
        failed,
        None,
        tuple(c.as_dict() for c in checks),
        hardware_class=cls,
        plain_runs=plain_ids,
    )
    return Fit(outcome, rates, hosts.pop() if len(hosts) == 1 else None, artifacts)


def _unique(docs: Sequence[Any]) -> list[Any]:
    seen: list[Any] = []
    for d in docs:
        if d not in seen:
            seen.append(d)
    return seen


# -- the calibrations document (calibrate-experiment's --out, predict-experiment's --calibrations) ----------


def calibrations_doc(
    experiment: str, spec_sha256: str, outcomes: Sequence[CalibrationOutcome]
) -> dict[str, Any]:
    return {
        "experiment": experiment,
        "spec_sha256": spec_sha256,
        "calibrations": [o.to_json() for o in outcomes],
    }


def calibration_ids(doc: Any, where: str, spec_sha256: str) -> dict[CalibrationKey, int]:
    """The stored calibration of each (pattern, notifier, hardware class) in a calibrations document
    (``where``: its file, for the errors); the document must be this spec's."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("calibrations"), list):
        raise DemuxlabError(f"{where}: calibrations: not the output of `demuxlab model calibrate-experiment`")
    if doc.get("spec_sha256") != spec_sha256:
        raise DemuxlabError(
            f"{where}: spec_sha256: {str(doc.get('spec_sha256'))[:12]!r} is not this spec's "
            f"({spec_sha256[:12]}): calibrate again"
        )
    ids: dict[CalibrationKey, int] = {}
    for i, entry in enumerate(doc["calibrations"]):
        if not isinstance(entry, dict):
            raise DemuxlabError(f"{where}: calibrations[{i}]: not an object")
        cid = entry.get("calibration_id")
        if cid is None:
            continue
        if not isinstance(cid, int):
            raise DemuxlabError(f"{where}: calibrations[{i}].calibration_id: not an integer: {cid!r}")
        cls = entry.get("hardware_class")  # absent in files written before classes: a local sweep
        if cls is not None and not isinstance(cls, str):
            raise DemuxlabError(f"{where}: calibrations[{i}].hardware_class: not a string: {cls!r}")
        ids[(str(entry.get("pattern")), str(entry.get("notifier")), cls)] = cid
    return ids


def missing_reasons(doc: Any, where: str, spec_sha256: str) -> dict[tuple[str, str], str]:
    """Why each (pattern, notifier) of a calibrations document has no calibrated predictions where it has
    none: its refusal with the figure (``error``), or that its runs all failed; fitted pairs are not listed
    (the recommendation's ``model_missing``, issue 43). Several hardware classes: their reasons joined."""
    calibration_ids(doc, where, spec_sha256)  # the same checks: this spec's calibrate-experiment output
    return join_reasons(
        (str(e.get("pattern")), str(e.get("notifier")), e.get("hardware_class"), e.get("status"), e["error"])
        for e in doc["calibrations"]
        if e.get("calibration_id") is None and isinstance(e.get("error"), str)
    )


def join_reasons(
    refusals: Iterable[tuple[str, str, str | None, str | None, str]],
) -> dict[tuple[str, str], str]:
    """(pattern, notifier, hardware class, status, error) of each calibration not fitted → per (pattern,
    notifier) why, in the recommendation's words (``model_missing``), the classes in order: one wording
    whether the refusals come from calibrations.json (:func:`missing_reasons`) or from the database
    (:func:`demuxlab.validation.store.refusal_reasons`, what a bundle's reproduce has)."""
    out: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for pattern, notifier, cls, status, error in refusals:
        why = ("calibration refused: " if status == "refused" else "not calibrated: ") + error
        out.setdefault((pattern, notifier), []).append((cls or "", why if cls is None else f"{cls}: {why}"))
    return {k: "; ".join(w for _, w in sorted(v)) for k, v in out.items()}


def refusal_status(source_runs: Sequence[str], error: str) -> str:
    """A calibration not fitted: ``no runs`` (no successful calibration run) or ``refused`` (the fit or its
    self-check said no)."""
    return "no runs" if not source_runs or error.startswith("no successful") else "refused"
