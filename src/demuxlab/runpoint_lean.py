"""``demuxlab-run``: the lean start-up of one run, for the workflow's run jobs on a cluster or in Slurm.

``demuxlab run-point SPEC`` loads the spec the way a user's command must: YAML with its safety bounds, the
JSON schema, ``demux-server --list``, the run order. That costs a run process about 0.55 CPU-s, most of it
importing jsonschema, PyYAML, click and numpy, and a cluster sweep pays it once per run on the controller
(64 pairs of 60 s runs: over half a CPU of the controller's two, and the start-up burst of runs that end
together delays every lane). The workflow's controller has already loaded and checked every spec; its rule
``checked_spec`` writes what a run needs of one, ``results/<experiment>/checked.json``
(:func:`checked_doc`): the spec's SHA-256, its phases, launcher and pinned hardware class, the git revision,
and every point by its key. A run job then starts here instead, and

* trusts that file only for the spec it was made from: the spec's bytes are read and hashed, and a
  different digest (the spec edited since the workflow checked it) refuses the run in one line;
* takes its point by the key the workflow passes (``--point-key``, ``--repeat``); the run id's rule is
  checked again where it matters, at ingest;
* imports no numpy, scipy, jsonschema, PyYAML or click (argparse and the launcher's own modules; the
  statistics of a record are computed lazily, only for a real run's per-second throughput).

What it runs is what ``run-point`` runs: :func:`demuxlab.cluster.run.run_on_cluster` for ``--pairs-from``
(remote or sim launcher) and :mod:`demuxlab.slurm.job` inside a Slurm job (``--slurm``); the record and the
retry rule (a failed attempt before the last is kept under ``failures/`` and exits 1) are the same.
``bench/perf/cluster_sim_bench.py`` measures the cost per run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from demuxlab.errors import ConfigError, DemuxlabError, SpecError
from demuxlab.phases import Phases
from demuxlab.point import Point

if TYPE_CHECKING:
    from demuxlab.launch.base import RunRequest

CHECKED_FORMAT = "demuxlab.checked/1"


@dataclass(frozen=True)
class CheckedSpec:
    """A spec as the controller checked it, re-verified against the file by its digest."""

    name: str
    path: str  # as the controller named it (the record's spec_path is relative to the repository)
    sha256: str
    text: str
    phases: Phases
    launcher: str
    hardware_class: str | None
    git_rev: str | None
    points: dict[str, dict[str, Any]]
    steady: dict[str, Any] | None = None

    def point(self, key: str) -> Point:
        doc = self.points.get(key)
        if doc is None:
            raise SpecError(
                f"{self.path}: point {key!r} is not a point of this spec (checked by the workflow)"
            )
        return Point.from_json(doc)

    def experiment(self, spec_path: str) -> dict[str, Any]:
        """The run record's ``experiment`` (CONTRACTS.md §5)."""
        return {
            "name": self.name,
            "spec_sha256": self.sha256,
            "git_rev": self.git_rev,
            "spec_path": spec_path,
            "spec_text": self.text,
        }


def checked_doc(spec: Any, points: Sequence[Point]) -> dict[str, Any]:
    """What the controller writes for a loaded, checked :class:`demuxlab.spec.Spec` (every point of the run
    order, calibration points included)."""
    adaptive = getattr(spec, "adaptive", None)
    steady = getattr(adaptive, "steady", None) if adaptive is not None else None
    return {
        "format": CHECKED_FORMAT,
        "experiment": spec.name,
        "spec": str(Path(spec.path).resolve()),
        "spec_sha256": spec.sha256,
        "phases": spec.phases.to_json(),
        "launcher": spec.launcher,
        "hardware_class": spec.hardware_class,
        # An adaptive sweep's measured runs end when steady (demuxlab.steady); None: the whole phase.
        "steady": None if steady is None else steady.to_json(),
        "points": {p.point_key: p.to_json() for p in points},
    }


def checked_doc_of(spec_path: Path) -> dict[str, Any]:
    """The checked spec of the spec at ``spec_path`` (the workflow's rule ``checked_spec``, after the plan
    checked it against the server's pairs)."""
    from demuxlab.spec import load_spec, run_order

    spec = load_spec(spec_path)
    points: dict[str, Point] = {}
    for point, _ in run_order(spec):
        points.setdefault(point.point_key, point)
    return checked_doc(spec, list(points.values()))


def load_checked(path: Path, git_rev: str | None = None) -> CheckedSpec:
    """The checked spec of ``path``, after hashing the spec file it names (one line on any mismatch);
    ``git_rev``: the revision the controller started from."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: checked spec not found (the workflow's checked_spec rule writes it)"
        ) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: checked spec unreadable: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != CHECKED_FORMAT:
        raise ConfigError(f"{path}: format: not a {CHECKED_FORMAT} document")
    spec_file = Path(str(doc.get("spec")))
    try:
        raw = spec_file.read_bytes()
    except OSError as exc:
        raise SpecError(f"{spec_file}: cannot read: {exc.strerror}") from None
    digest = hashlib.sha256(raw).hexdigest()
    if digest != doc.get("spec_sha256"):
        raise SpecError(
            f"{spec_file}: changed since the workflow checked it (sha256 {digest[:12]}…, checked "
            f"{str(doc.get('spec_sha256'))[:12]}…): rerun the workflow"
        )
    return CheckedSpec(
        name=str(doc["experiment"]),
        path=str(spec_file),
        sha256=digest,
        text=raw.decode("utf-8"),
        phases=Phases(**{k: float(doc["phases"][k]) for k in ("warmup_s", "measure_s", "cooldown_s")}),
        launcher=str(doc["launcher"]),
        hardware_class=doc.get("hardware_class"),
        git_rev=git_rev,
        points=dict(doc["points"]),
        steady=doc.get("steady"),
    )


def write_record(record: dict[str, Any], args: argparse.Namespace, checked: CheckedSpec) -> int:
    """Where the workflow expects the record (a failed attempt before the last goes to ``failures/``, as
    ``run-point`` does: :func:`demuxlab.runpoint._write_record`); the exit status (1: retry)."""
    from demuxlab.runpoint import RunPointRequest, _write_record

    point = checked.point(args.point_key)
    req = RunPointRequest(
        spec_path=Path(checked.path),
        run_id=args.run_id,
        out=args.out,
        point_key=args.point_key,
        repeat=args.repeat,
        attempt=args.attempt,
        max_attempts=args.max_attempts,
    )
    result = _write_record(record, req, point, args.repeat)
    print(result.message, file=sys.stderr)
    return 1 if result.retry else 0


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="demuxlab-run",
        description="One run of a spec the workflow has checked (results/<experiment>/checked.json).",
    )
    ap.add_argument("checked", type=Path, help="The controller's checked spec (checked.json).")
    ap.add_argument("--run-id", required=True)
    ap.add_argument("--point-key", required=True)
    ap.add_argument("--repeat", type=int, required=True)
    ap.add_argument("--out", type=Path, required=True, help="Where the run record goes.")
    ap.add_argument("--launcher", help="remote | sim (--pairs-from), native | docker (--slurm).")
    ap.add_argument("--attempt", type=int, default=1)
    ap.add_argument("--max-attempts", type=int, default=1)
    ap.add_argument("--stall-timeout", type=float, default=5.0)
    ap.add_argument("--instrument", action="store_true")
    ap.add_argument("--git-rev", help="The checkout's revision as the workflow's controller started.")
    ap.add_argument("--noise-wait", type=float, default=60.0)
    ap.add_argument("--quarantine-after", type=int, default=3)
    cluster = ap.add_argument_group("a cluster of host pairs")
    cluster.add_argument("--pairs-from", help="Inventory or simulated cluster file.")
    cluster.add_argument("--cluster-state", type=Path, default=Path("results/cluster"))
    cluster.add_argument("--lane", type=int, default=0)
    cluster.add_argument("--pair-wait", type=float, default=3600.0)
    slurm = ap.add_argument_group("inside a Slurm job (the slurm profile)")
    slurm.add_argument("--slurm", action="store_true", help="Run on the two nodes of this Slurm job.")
    slurm.add_argument("--slurm-state", type=Path, default=Path("results/slurm"))
    slurm.add_argument("--stage", choices=("shared", "sbcast"), default="shared")
    slurm.add_argument("--drain", choices=("auto", "never"), default="auto")
    slurm.add_argument("--class-features", default="", help="Node features naming hardware classes.")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _main(args)
    except DemuxlabError as exc:
        print(f"demuxlab: error: {exc.message}", file=sys.stderr)
        return exc.exit_code


def _relative(path: str) -> str:
    from demuxlab.paths import repo_root

    try:
        return str(Path(path).resolve().relative_to(repo_root()))
    except ValueError:
        return path


def base_request(checked: CheckedSpec, args: argparse.Namespace) -> RunRequest:
    """The run as the checked spec and the options describe it (what ``run-point`` builds from the spec);
    where it runs adds the hosts and their pinning."""
    from demuxlab.launch.base import RunRequest
    from demuxlab.plan import Pinning

    point = checked.point(args.point_key)
    if args.repeat < 0:
        raise ConfigError(f"--repeat: {args.repeat} is not a repeat index")
    instrument = bool(args.instrument) or point.instrument
    steady = None
    if checked.steady is not None and not instrument:
        # An adaptive sweep's measured runs end when steady; calibration runs measure their whole phase.
        from demuxlab.steady import SteadyRule

        steady = SteadyRule(
            min_s=float(checked.steady["min_s"]), target_rel=float(checked.steady["target_rel"])
        )
    return RunRequest(
        run_id=args.run_id,
        experiment=checked.experiment(_relative(checked.path)),
        point=point,
        repeat=args.repeat,
        phases=checked.phases,
        pinning=Pinning((), (), False, False, ()),  # planned once the hosts are known
        hosts={},
        attempt=args.attempt,
        instrument=instrument,
        stall_timeout_s=args.stall_timeout,
        steady=steady,
    )


def _main(args: argparse.Namespace) -> int:
    checked = load_checked(args.checked, args.git_rev)
    base = base_request(checked, args)
    if args.slurm:
        from demuxlab.slurm.job import JobOptions, run_in_job

        opts = JobOptions(
            state=args.slurm_state,
            launcher=args.launcher or "native",
            stage=args.stage,
            drain=args.drain,
            quarantine_after=args.quarantine_after,
            noise_wait_s=args.noise_wait,
            out=args.out,
            attempt=args.attempt,
            max_attempts=args.max_attempts,
            class_features=tuple(f for f in args.class_features.split(",") if f),
        )
        record = run_in_job(base, opts)
        if record is None:  # an earlier job of this run already wrote its final record (adopted)
            return 0
        return write_record(record, args, checked)
    if not args.pairs_from:
        raise ConfigError("demuxlab-run runs on a cluster (--pairs-from) or in a Slurm job (--slurm)")
    from demuxlab.cluster.run import ClusterOptions, run_on_cluster, update_progress

    cluster = ClusterOptions(
        pairs_from=args.pairs_from,
        state=args.cluster_state,
        launcher=args.launcher or "remote",
        lane=args.lane,
        quarantine_after=args.quarantine_after,
        pair_wait_s=args.pair_wait,
        noise_wait_s=args.noise_wait,
    )
    record = run_on_cluster(checked, base, cluster, failures_dir=args.out.parent.parent / "failures")
    # The run process's own CPU so far (start-up included): what the controller pays per run, beside
    # Snakemake's share (bench/perf/cluster_sim_bench.py reports both).
    record.setdefault("scheduling", {})["runner_cpu_s"] = round(_cpu_s(), 4)
    try:
        return write_record(record, args, checked)
    finally:
        update_progress(cluster)


def _cpu_s() -> float:
    import resource

    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
