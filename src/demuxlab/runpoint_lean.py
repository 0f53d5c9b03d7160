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
``bench/cluster_sim_bench.py`` measures the cost per run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from demuxlab.errors import ConfigError, DemuxlabError, SpecError
from demuxlab.jsonio import write_json_atomic
from demuxlab.phases import Phases
from demuxlab.point import Point

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


def checked_doc(spec: Any, points: Sequence[Point], git_rev: str | None, spec_path: str) -> dict[str, Any]:
    """What the controller writes for a loaded, checked :class:`demuxlab.spec.Spec` (every point of the run
    order, calibration points included)."""
    return {
        "format": CHECKED_FORMAT,
        "experiment": spec.name,
        "spec": str(spec.path),
        "spec_path": spec_path,
        "spec_sha256": spec.sha256,
        "phases": spec.phases.to_json(),
        "launcher": spec.launcher,
        "hardware_class": spec.hardware_class,
        "git_rev": git_rev,
        "points": {p.point_key: p.to_json() for p in points},
    }


def load_checked(path: Path) -> CheckedSpec:
    """The checked spec of ``path``, after hashing the spec file it names (one line on any mismatch)."""
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
        phases=Phases.from_json(doc["phases"]),
        launcher=str(doc["launcher"]),
        hardware_class=doc.get("hardware_class"),
        git_rev=doc.get("git_rev"),
        points=dict(doc["points"]),
    )


def write_record(
    record: dict[str, Any], out: Path, run_id: str, point: Point, repeat: int, attempt: int, max_attempts: int
) -> int:
    """Write the record where the workflow expects it; the exit status (1: a failed attempt to retry).

    Before the last attempt a failed record goes to ``failures/<run>.attemptN.json`` (the workflow runs the
    job again); the last attempt's is the run's record, failed or not."""
    if record["status"] == "failed" and attempt < max_attempts:
        failed = out.parent.parent / "failures" / f"{run_id}.attempt{attempt}.json"
        write_json_atomic(failed, record)
        print(f"run {run_id}: attempt {attempt} failed: {record['failure_reason']}", file=sys.stderr)
        return 1
    write_json_atomic(out, record)
    if record["status"] == "ok":
        tput = (record.get("stats") or {}).get("throughput_msgs_per_s") or 0.0
        print(f"run {run_id}: {point.point_key} repeat {repeat}: ok, {tput:,.0f} msgs/s", file=sys.stderr)
    else:
        print(
            f"run {run_id}: {point.point_key} repeat {repeat}: failed: {record['failure_reason']}",
            file=sys.stderr,
        )
    return 0


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


def _main(args: argparse.Namespace) -> int:
    checked = load_checked(args.checked)
    point = checked.point(args.point_key)
    if not args.repeat >= 0:
        raise ConfigError(f"--repeat: {args.repeat} is not a repeat index")
    experiment = checked.experiment(_relative(checked.path))
    instrument = bool(args.instrument) or point.instrument
    if args.slurm:
        from demuxlab.slurm.job import JobOptions, run_in_job

        record = run_in_job(
            checked,
            point,
            args.repeat,
            args.run_id,
            experiment,
            JobOptions(
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
            ),
            stall_timeout_s=args.stall_timeout,
            instrument=instrument,
        )
        if record is None:  # an earlier job of this run already wrote its final record (adopted)
            return 0
        return write_record(
            record, args.out, args.run_id, point, args.repeat, args.attempt, args.max_attempts
        )
    if not args.pairs_from:
        raise ConfigError("demuxlab-run runs on a cluster (--pairs-from) or in a Slurm job (--slurm)")
    from demuxlab.cluster.run import ClusterOptions, run_on_cluster, update_progress

    opts = ClusterOptions(
        pairs_from=args.pairs_from,
        state=args.cluster_state,
        launcher=args.launcher or "remote",
        lane=args.lane,
        quarantine_after=args.quarantine_after,
        pair_wait_s=args.pair_wait,
        noise_wait_s=args.noise_wait,
    )
    record = run_on_cluster(
        checked,
        point,
        args.repeat,
        args.run_id,
        experiment,
        opts,
        attempt=args.attempt,
        stall_timeout_s=args.stall_timeout,
        instrument=instrument,
        failures_dir=args.out.parent.parent / "failures",
    )
    # The run process's own CPU so far (start-up included): what the controller pays per run, beside
    # Snakemake's share (bench/cluster_sim_bench.py reports both).
    record.setdefault("scheduling", {})["runner_cpu_s"] = round(_cpu_s(), 4)
    try:
        return write_record(
            record, args.out, args.run_id, point, args.repeat, args.attempt, args.max_attempts
        )
    finally:
        update_progress(opts)


def _cpu_s() -> float:
    import resource

    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
