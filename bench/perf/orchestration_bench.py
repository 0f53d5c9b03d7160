"""Orchestration overhead per run of the native and docker launchers: the wall time of a run outside its
warm-up + measure + cool-down phases (start the server, wait for its listening line, start the client,
stop the server, clean up, assemble the record).

It drives the real code path, ``get_launcher(name).run(RunRequest(...))``, ``--runs`` times per launcher
on one small point (reactor/epoll-lt, 1 server thread, 16 connections, 1-byte messages) and prints:

- the record's own ``orchestration_s`` (median, max) against the target (native 2 s, docker 5 s per run);
  the verdict is PASS when every run ended ``ok`` and the largest ``orchestration_s`` is within target;
- the wall time of the whole ``run()`` call, which also counts ``check()`` and ``artifacts()`` (the
  record's clock starts after them);
- where the overhead goes (median seconds per step, measured by timing the launcher's own methods);
- one ``demuxlab run-point`` subprocess for a run of tests/integration/specs/tiny.yaml (run id from
  ``demuxlab plan``), which adds Python start-up, spec loading, host facts and the record write.

A launcher that cannot run here (binaries or images missing, engine down) is reported in its row; before
that the script tries ``make build`` / ``make images`` once (``--no-build`` skips this).

    .venv/bin/python -m bench orchestration_bench [--runs 5] [--measure-s 1] [--launchers native,docker]

Exit status: 0 when every real row passes, 1 when one fails or its launcher is unavailable (or the CLI
run fails), 2 for bad options.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import REPO
from bench.common.cli import BenchError, entry, parser
from demuxlab.errors import DemuxlabError
from demuxlab.launch import LAUNCHERS, Launcher, RunRequest, get_launcher
from demuxlab.plan import plan_pinning
from demuxlab.spec import Phases, Point
from demuxlab.topology import collect_facts

TINY_SPEC = REPO / "tests" / "integration" / "specs" / "tiny.yaml"
DEMUXLAB = Path(sys.executable).with_name("demuxlab")
TARGET_S = {"native": 2.0, "docker": 5.0}
MAKE_TARGET = {"native": "build", "docker": "images"}
MAKE_TIMEOUT_S = 600.0

# The launcher methods timed for the breakdown, under the names the table shows. `client` includes the
# phases, which are subtracted; `other` is what no timed step covers (Popen, the record, steady_state).
STEPS: tuple[tuple[str, str], ...] = (
    ("check", "check"),
    ("artifacts", "artifacts"),
    ("_wait_listening", "server-start"),
    ("_client", "client-phases"),
    ("_stop", "server-stop"),
    ("cleanup", "cleanup"),
)


@dataclass
class RunSample:
    wall_s: float  # the whole run() call, timed here
    orchestration_s: float  # the record's field
    status: str
    failure_reason: str | None
    steps: dict[str, float]


@dataclass
class LauncherResult:
    name: str
    label: str  # the row's name: the launcher, plus any bench-side change to it
    target_s: float
    phases_s: float
    samples: list[RunSample] = field(default_factory=list)
    unavailable: str | None = None

    @property
    def ok(self) -> list[RunSample]:
        return [s for s in self.samples if s.status == "ok"]

    @property
    def verdict(self) -> str:
        if self.unavailable is not None:
            return "N/A"
        if not self.samples or len(self.ok) != len(self.samples):
            return "FAIL"
        return "PASS" if max(s.orchestration_s for s in self.ok) <= self.target_s else "FAIL"


@dataclass
class CliResult:
    launcher: str
    point_key: str
    plan_wall_s: float
    startup_s: float  # `demuxlab --help`: interpreter + click, no subcommand module
    wall_s: float
    phases_s: float
    orchestration_s: float | None
    status: str
    failure_reason: str | None


# -- options ---------------------------------------------------------------------------------------------


def parse_launchers(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise BenchError("--launchers: empty list; valid: " + ", ".join(sorted(LAUNCHERS)))
    for n in names:
        if n not in LAUNCHERS:
            raise BenchError(f"--launchers: unknown launcher {n!r}; valid: {', '.join(sorted(LAUNCHERS))}")
    if len(set(names)) != len(names):
        raise BenchError(f"--launchers: {text!r} names a launcher twice")
    return names


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = parser(__doc__)
    p.add_argument("--runs", type=int, default=5, help="runs per launcher (default 5)")
    p.add_argument("--measure-s", type=float, default=1.0, help="measure phase of each run (default 1)")
    p.add_argument("--warmup-s", type=float, default=0.5, help="warm-up phase of each run (default 0.5)")
    p.add_argument("--launchers", default="native,docker", help="comma-separated (default native,docker)")
    p.add_argument("--no-build", action="store_true", help="do not run `make build` / `make images`")
    p.add_argument("--no-cli", action="store_true", help="skip the `demuxlab run-point` measurement")
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error(f"--runs must be >= 1, got {args.runs}")
    if not args.measure_s > 0:
        p.error(f"--measure-s must be > 0, got {args.measure_s:g}")
    if not args.warmup_s >= 0:
        p.error(f"--warmup-s must be >= 0, got {args.warmup_s:g}")
    try:
        args.launchers = parse_launchers(args.launchers)
    except BenchError as e:
        p.error(str(e))
    return args


# -- measuring -------------------------------------------------------------------------------------------


def bench_point() -> Point:
    return Point(
        pattern="reactor",
        notifier="epoll-lt",
        threads=1,
        work_us=0.0,
        connections=16,
        msg_size=1,
        client_threads=1,
        rate=None,
    )


def make_request(point: Point, phases: Phases, facts: dict[str, Any]) -> RunRequest:
    return RunRequest(
        # A fresh id per run: the docker launcher names containers after it.
        run_id=str(uuid.uuid4()),
        experiment={
            "name": "orchestration-bench",
            "spec_sha256": "0" * 64,
            "git_rev": None,
            "spec_path": None,
        },
        point=point,
        repeat=0,
        phases=phases,
        pinning=plan_pinning(facts, facts, point.threads, point.client_threads, True),
        hosts={"server": facts, "client": facts},
    )


def time_steps(launcher: Launcher, into: dict[str, float]) -> None:
    """Shadow the launcher's step methods on the instance with timed calls of the originals; each call adds
    its wall time to ``into[label]``. A method the launcher no longer has is skipped, not faked."""
    for attr, label in STEPS:
        original = getattr(launcher, attr, None)
        if not callable(original):
            continue

        def timed(*a: Any, _f: Callable[..., Any] = original, _l: str = label, **kw: Any) -> Any:
            t0 = time.monotonic()
            try:
                return _f(*a, **kw)
            finally:
                into[_l] = into.get(_l, 0.0) + time.monotonic() - t0

        setattr(launcher, attr, timed)


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def _last_line(text: str) -> str:
    return next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip()), "")


def ensure_ready(name: str, build: bool) -> str | None:
    """None when launcher ``name`` can run here, else why not (after one `make` attempt if ``build``)."""
    try:
        get_launcher(name).check()
        return None
    except DemuxlabError as e:
        first = e.message
    if not build:
        return first
    target = MAKE_TARGET[name]
    try:
        res = subprocess.run(
            ["make", "-C", str(REPO), target],
            capture_output=True,
            text=True,
            timeout=MAKE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"{first}; `make {target}` did not finish within {MAKE_TIMEOUT_S:g} s"
    if res.returncode != 0:
        why = _last_line(res.stderr) or _last_line(res.stdout) or f"exit status {res.returncode}"
        return f"{first}; `make {target}` failed: {why}"
    try:
        get_launcher(name).check()
        return None
    except DemuxlabError as e:
        return f"still unavailable after `make {target}`: {e.message}"


def bench_launcher(
    name: str,
    runs: int,
    phases: Phases,
    facts: dict[str, Any],
    build: bool,
) -> LauncherResult:
    phases_s = phases.warmup_s + phases.measure_s + phases.cooldown_s
    result = LauncherResult(name=name, label=name, target_s=TARGET_S[name], phases_s=phases_s)
    result.unavailable = ensure_ready(name, build)
    if result.unavailable is not None:
        return result
    point = bench_point()
    for i in range(runs):
        launcher = get_launcher(name)
        steps: dict[str, float] = {}
        time_steps(launcher, steps)
        req = make_request(point, phases, facts)
        t0 = time.monotonic()
        try:
            record = launcher.run(req)
        except DemuxlabError as e:  # the environment broke mid-benchmark (engine stopped, binary removed)
            result.unavailable = f"run {i + 1} raised: {e.message}"
            return result
        wall = time.monotonic() - t0
        # The phases are only inside a run whose client ran; a failed run's breakdown is left out below.
        ran = record["status"] == "ok"
        if ran and "client-phases" in steps:
            steps["client-phases"] -= phases_s
        steps["other"] = wall - (phases_s if ran else 0.0) - sum(steps.values())
        result.samples.append(
            RunSample(
                wall_s=wall,
                orchestration_s=float(record["orchestration_s"] or 0.0),
                status=str(record["status"]),
                failure_reason=record.get("failure_reason"),
                steps=steps,
            )
        )
        why = f" ({record['failure_reason']})" if record["failure_reason"] else ""
        print(
            f"  {name} run {i + 1}/{runs}: {record['status']},"
            f" orchestration_s {record['orchestration_s'] or 0.0:.3f}, run() {wall:.3f} s{why}",
            file=sys.stderr,
            flush=True,
        )
    return result


def bench_cli(launcher: str) -> CliResult:
    """One `demuxlab run-point` subprocess for the first run of the tiny spec."""
    if not DEMUXLAB.exists():
        raise BenchError(f"{DEMUXLAB} not found: install the package into the venv (`make setup`)")
    t0 = time.monotonic()
    subprocess.run([str(DEMUXLAB), "--help"], capture_output=True, text=True, timeout=60, check=True)
    startup = time.monotonic() - t0

    t0 = time.monotonic()
    res = subprocess.run(
        [str(DEMUXLAB), "plan", str(TINY_SPEC)], capture_output=True, text=True, timeout=120, check=False
    )
    plan_wall = time.monotonic() - t0
    if res.returncode != 0:
        raise BenchError(f"`demuxlab plan {TINY_SPEC}` failed: {_first_line(res.stderr)}")
    first = json.loads(res.stdout)["runs"][0]

    with tempfile.TemporaryDirectory(prefix="orchestration-bench-") as tmp:
        out = Path(tmp) / "runs" / "record.json"
        cmd = [str(DEMUXLAB), "run-point", str(TINY_SPEC), "--run-id", first["run_id"]]
        cmd += ["--out", str(out), "--launcher", launcher]
        t0 = time.monotonic()
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        wall = time.monotonic() - t0
        if not out.is_file():
            raise BenchError(
                f"`demuxlab run-point` wrote no record (exit {res.returncode}): {_first_line(res.stderr)}"
            )
        record = json.loads(out.read_text())
    ph = record["phases"]
    return CliResult(
        launcher=launcher,
        point_key=str(first["point_key"]),
        plan_wall_s=plan_wall,
        startup_s=startup,
        wall_s=wall,
        phases_s=float(ph["warmup_s"]) + float(ph["measure_s"]) + float(ph["cooldown_s"]),
        orchestration_s=record.get("orchestration_s"),
        status=str(record["status"]),
        failure_reason=record.get("failure_reason"),
    )


# -- printing --------------------------------------------------------------------------------------------


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return "\n".join(lines)


def summary_table(results: Sequence[LauncherResult]) -> str:
    """One row per launcher; the figures are over the runs that ended ``ok`` (a failed run stops early,
    so its overhead says nothing about a run's)."""
    headers = [
        "launcher",
        "runs",
        "ok",
        "orch_s median",
        "orch_s max",
        "run() wall median",
        "run() overhead median",
        "target",
        "verdict",
    ]
    rows: list[list[str]] = []
    for r in results:
        target = f"<= {r.target_s:g} s"
        if not r.ok:
            rows.append([r.label, str(len(r.samples)), "0", "-", "-", "-", "-", target, r.verdict])
            continue
        orch = [s.orchestration_s for s in r.ok]
        walls = [s.wall_s for s in r.ok]
        rows.append(
            [
                r.label,
                str(len(r.samples)),
                str(len(r.ok)),
                f"{median(orch):.3f} s",
                f"{max(orch):.3f} s",
                f"{median(walls):.3f} s",
                f"{median(walls) - r.phases_s:.3f} s",
                target,
                r.verdict,
            ]
        )
    return format_table(headers, rows)


def breakdown_table(results: Sequence[LauncherResult]) -> str:
    labels = [label for _, label in STEPS] + ["other"]
    rows: list[list[str]] = []
    for r in results:
        if r.ok:
            rows.append([r.label] + [f"{median([s.steps.get(lb, 0.0) for s in r.ok]):.3f}" for lb in labels])
    return format_table(["launcher (median s)", *labels], rows)


def failure_lines(r: LauncherResult) -> list[str]:
    """The failed runs of a row, one line per distinct reason."""
    by_reason: dict[str, list[int]] = {}
    for i, s in enumerate(r.samples):
        if s.status != "ok":
            by_reason.setdefault(s.failure_reason or "no reason given", []).append(i + 1)
    return [
        f"{r.label}: run{'s' if len(ns) > 1 else ''} {', '.join(map(str, ns))} failed: {reason}"
        for reason, ns in by_reason.items()
    ]


def report(
    results: Sequence[LauncherResult], cli: CliResult | None, cli_error: str | None, phases: Phases
) -> str:
    point = bench_point()
    out = [
        f"orchestration overhead per run: point {point.point_key}, phases warm-up {phases.warmup_s:g} s"
        f" + measure {phases.measure_s:g} s + cool-down {phases.cooldown_s:g} s",
        "",
        summary_table(results),
    ]
    for r in results:
        if r.unavailable is not None:
            out.append(f"{r.label}: unavailable: {r.unavailable}")
        out += failure_lines(r)
        if r.ok:
            out.append(
                f"{r.label}: orchestration_s per run: {', '.join(f'{s.orchestration_s:.3f}' for s in r.ok)}"
            )
            overhead = max(s.wall_s for s in r.ok) - r.phases_s
            if overhead > r.target_s >= max(s.orchestration_s for s in r.ok):
                out.append(
                    f"{r.label}: note: counting check() and artifacts(), which the record's clock leaves out,"
                    f" the worst run() overhead is {overhead:.3f} s > target {r.target_s:g} s"
                )
    if any(r.ok for r in results):
        out += ["", "where the overhead goes (timed launcher steps; client-phases = client call - phases):"]
        out.append(breakdown_table(results))
    out.append("")
    if cli is not None:
        line = (
            f"CLI: `demuxlab run-point` ({cli.launcher}, tiny.yaml {cli.point_key}): wall {cli.wall_s:.3f} s,"
            f" phases {cli.phases_s:g} s, overhead {cli.wall_s - cli.phases_s:.3f} s"
        )
        if cli.orchestration_s is not None:
            extra = cli.wall_s - cli.phases_s - float(cli.orchestration_s)
            line += f" = orchestration_s {float(cli.orchestration_s):.3f} s + CLI {extra:.3f} s"
        line += (
            f" (`demuxlab --help` start-up {cli.startup_s:.3f} s; `demuxlab plan` {cli.plan_wall_s:.3f} s)"
        )
        out.append(line)
        if cli.status != "ok":
            out.append(f"CLI: the run failed: {cli.failure_reason}")
    elif cli_error is not None:
        out.append(f"CLI: not measured: {cli_error}")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    phases = Phases(warmup_s=args.warmup_s, measure_s=args.measure_s, cooldown_s=0.0)
    facts = collect_facts()
    results: list[LauncherResult] = []
    for name in args.launchers:
        results.append(bench_launcher(name, args.runs, phases, facts, not args.no_build))
    real = [r for r in results if r.label == r.name]

    cli: CliResult | None = None
    cli_error: str | None = None
    if not args.no_cli:
        usable = [r.name for r in real if r.unavailable is None and r.ok]
        if not usable:
            cli_error = "no launcher completed a run here (see the rows above)"
        else:
            try:
                cli = bench_cli(usable[0])
            except (BenchError, subprocess.SubprocessError, OSError, ValueError, KeyError) as e:
                cli_error = " ".join(str(e).split())

    print(report(results, cli, cli_error, phases), flush=True)
    failed = any(r.verdict != "PASS" for r in real) or (cli is not None and cli.status != "ok")
    return 1 if failed or cli_error is not None else 0


if __name__ == "__main__":
    entry(main)
