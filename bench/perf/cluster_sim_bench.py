"""Scale of cluster sweeps on a simulated cluster: the real workflow (`snakemake --profile cluster`), the
real scheduler, leases, state files and ingest, with the ``sim`` launcher, which only waits each run's
duration. Two figures:

1. **DAG build** (``--dag-runs``, default 2500,5000,10000; ``--dag-profiles``, default cluster,local): the
   time and peak memory of ``snakemake --profile P -n all`` for sweeps of those sizes (the cluster profile
   on ``--dag-pairs`` (64) simulated pairs, the local one on its one lane), to see that the DAG grows no
   faster than the sweep (runs per second of DAG building, MB per 1,000 runs) and costs the cluster
   profile no more than the local one. The runs join the DAG through the workflow's checkpoints (each
   experiment's plan, the cluster's pairs), so they are made first, timed apart: ``fresh -n`` is the dry
   run of an empty folder (parse, and the DAG up to the checkpoints), ``checkpoints`` the real run that
   makes them (build, ``demuxlab plan``, ``demuxlab cluster pairs``), then ``seconds`` the full dry run.
2. **Makespan** (``--runs``, ``--pairs``, ``--duration-s``): the sweep executed; makespan of the runs
   (first run start → last run end, from the records) against the ideal ``ceil(runs / pairs) × duration``,
   the scheduler overhead per run (lane time ÷ runs per lane − duration), the wall time of the whole
   workflow (ingest and report included), the controller's peak memory (Snakemake alone, sampled from
   /proc: VmHWM; and with its largest job process), its CPU per run (Snakemake alone, which includes the
   ingests it runs in its own threads, and its job processes: run-point, and the fixed database, report and
   claims jobs), and the load average during the sweep (other users of the machine disturb the figures).

The full issue scale is ``--runs 10000 --pairs 64``: with runs of d seconds that takes ≥ 157·d seconds,
and the controller must have the CPU for it: n pairs of d-second runs need n·c/d CPUs, c the CPU per run
the last lines print (since the lean run start-up, demuxlab-run, about 0.15 s: Snakemake's share and the run
process's Python start-up), so 64 pairs of minute-long runs want about 0.16 CPUs of it. The defaults (80 runs,
8 pairs, 20 s) take a few minutes.

    .venv/bin/python -m bench cluster_sim_bench [--runs 80] [--pairs 8] [--duration-s 20]
        [--dag-runs 2500,5000,10000] [--dag-profiles cluster,local] [--skip-dag] [--skip-sweep]

Prints figures; asserts nothing (the shared machine's load disturbs them: say so when reporting).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from bench import REPO
from bench.common.cli import entry, int_list, parser, positive_float, positive_int

SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
NOTIFIERS = ["select", "poll", "epoll-lt", "epoll-et"]


def write_spec(folder: Path, name: str, runs: int, duration_s: float) -> int:
    """A reactor-only spec (no model stages) with about ``runs`` runs: 4 notifiers × C connections × R."""
    repeats = max(1, min(100, math.ceil(runs / 4)))
    conns = max(1, math.ceil(runs / (4 * repeats)))
    text = (
        f"name: {name}\nreproduces: none\nlauncher: native\nseed: 1\nrepeats: {repeats}\n"
        f"phases: {{warmup_s: 0, measure_s: {duration_s:g}, cooldown_s: 0}}\n"
        "calibration: {repeats: 0}\n"
        f"designs:\n  - {{pattern: reactor, notifiers: [{', '.join(NOTIFIERS)}]}}\n"
        f"matrix: {{threads: [1], work_us: [0], connections: [{', '.join(str(8 + i) for i in range(conns))}],"
        " msg_size: [1]}\n"
    )
    (folder / f"{name}.yaml").write_text(text)
    return 4 * conns * repeats


def snakemake(
    workdir: Path,
    specs: Path,
    cluster: Path,
    name: str,
    *extra: str,
    profile: str = "cluster",
    targets: tuple[str, ...] = ("all",),
) -> list[str]:
    return [
        SNAKEMAKE, "--snakefile", str(REPO / "workflows" / "Snakefile"),
        "--profile", str(REPO / "workflows" / profile), "--directory", str(workdir),
        *targets, "--config", f"experiments=[{name}]", f"experiments_dir={specs}", *extra,
    ]  # fmt: skip


class Watch:
    """Samples the controller process itself (not its jobs) from /proc while it runs: its own CPU seconds
    (utime + stime) and peak RSS (VmHWM), and the machine's 1-minute load average; ``samples`` keeps
    (wall-clock time, own CPU s, its finished jobs' CPU s: cutime + cstime) for :meth:`cpu_between`."""

    def __init__(self, pid: int, every_s: float = 0.5) -> None:
        self.pid, self.every_s = pid, every_s
        self.cpu_s = 0.0
        self.hwm_mb = 0.0
        self.loads: list[float] = []
        self.samples: list[tuple[float, float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        last_load = 0.0
        while not self._stop.is_set():
            try:
                stat = Path(f"/proc/{self.pid}/stat").read_text()
                fields = stat[stat.rindex(")") + 2 :].split()
                self.cpu_s = (int(fields[11]) + int(fields[12])) / tick
                self.samples.append((time.time(), self.cpu_s, (int(fields[13]) + int(fields[14])) / tick))
                for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        self.hwm_mb = max(self.hwm_mb, int(line.split()[1]) / 1024)
            except (OSError, ValueError, IndexError):
                pass
            if time.monotonic() - last_load >= 10:
                self.loads.append(os.getloadavg()[0])
                last_load = time.monotonic()
            self._stop.wait(self.every_s)

    def cpu_between(self, t0: float, t1: float) -> tuple[float, float]:
        """CPU seconds of the controller itself and of its jobs that ended, from wall-clock time t0 to t1
        (as sampled: the last sample at or before each; a job's CPU counts when it ends)."""

        def at(t: float) -> tuple[float, float]:
            before = [s for s in self.samples if s[0] <= t] or self.samples[:1] or [(t, 0.0, 0.0)]
            return before[-1][1], before[-1][2]

        (own0, jobs0), (own1, jobs1) = at(t0), at(t1)
        return own1 - own0, jobs1 - jobs0

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def timed(cmd: list[str], env: dict[str, str], log: Path) -> tuple[float, float, int, float, Watch]:
    """Wall seconds, peak RSS in MB of snakemake (or of its largest job), exit status, CPU seconds of
    snakemake and its jobs, and the watch of snakemake alone."""
    t0 = time.monotonic()
    with log.open("w") as out:
        # From workflows/, as a user types it (the profile's configfile is relative to it).
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO / "workflows")
        watch = Watch(proc.pid)
        _, status, usage = os.wait4(proc.pid, 0)
        watch.stop()
    cpu = usage.ru_utime + usage.ru_stime
    return time.monotonic() - t0, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status), cpu, watch


def env_for(tmp: Path, cluster: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["DEMUXLAB_INVENTORY"] = str(cluster)
    env["DEMUXLAB_LEASE_DIR"] = str(tmp / "leases")
    return env


def dag_figures(tmp: Path, sizes: list[int], pairs: int, profiles: list[str]) -> None:
    cluster = tmp / "dag-cluster.yaml"
    cluster.write_text(f"simulated: {{pairs: {pairs}}}\n")
    print(f"DAG build: snakemake --profile P -n all ({pairs} simulated pairs for the cluster profile)")
    head = (
        "profile",
        "runs",
        "fresh -n",
        "checkpoints",
        "jobs",
        "seconds",
        "runs/s",
        "peak MB",
        "MB/1k runs",
    )
    widths = (8, 7, 9, 12, 7, 8, 8, 8, 10)
    print(" ".join(f"{h:>{w}}" for h, w in zip(head, widths, strict=True)))
    for size in sizes:
        for profile in profiles:
            specs = tmp / f"dag-specs-{profile}-{size}"
            specs.mkdir()
            name = f"bench-dag-{size}"
            runs = write_spec(specs, name, size, 5)
            work = tmp / f"dag-work-{profile}-{size}"
            work.mkdir()
            log = tmp / f"dag-{profile}-{size}.log"
            fresh, _, code, _, _ = timed(
                snakemake(work, specs, cluster, name, "-n", "--quiet", "rules", profile=profile),
                env_for(tmp, cluster),
                log,
            )
            checkpoints: tuple[str, ...] = (f"results/plans/{name}.json",)
            if profile == "cluster":
                checkpoints += ("results/cluster/inventory.json",)
            made, _, code2, _, _ = timed(
                snakemake(work, specs, cluster, name, profile=profile, targets=checkpoints),
                env_for(tmp, cluster),
                log,
            )
            if code != 0 or code2 != 0:
                print(f"{profile:>8} {runs:>7} failed (status {code or code2}): see {log}")
                continue
            wall, rss, code, _, _ = timed(
                snakemake(work, specs, cluster, name, "-n", "--quiet", "rules", profile=profile),
                env_for(tmp, cluster),
                log,
            )
            total = re.search(r"^total\s+(\d+)", log.read_text(), re.M)
            jobs = total.group(1) if total else "?"
            if code != 0:
                print(f"{profile:>8} {runs:>7} failed (status {code}): see {log}")
                continue
            print(
                f"{profile:>8} {runs:>7} {fresh:>9.1f} {made:>12.1f} {jobs:>7} {wall:>8.1f}"
                f" {runs / wall:>8.0f} {rss:>8.0f} {rss / runs * 1000:>10.1f}"
            )


def _ts(text: str) -> float:
    return datetime.strptime(text.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


def sweep_figures(tmp: Path, runs_wanted: int, pairs: int, duration_s: float) -> None:
    cluster = tmp / "cluster.yaml"
    cluster.write_text(f"simulated: {{pairs: {pairs}}}\n")
    specs = tmp / "specs"
    specs.mkdir()
    name = "bench-sweep"
    runs = write_spec(specs, name, runs_wanted, duration_s)
    work = tmp / "work"
    work.mkdir()
    log = tmp / "sweep.log"
    print(
        f"\nSweep: {runs} runs of {duration_s:g} s on {pairs} simulated pairs (real workflow, sim launcher)"
    )
    wall, rss, code, cpu, watch = timed(snakemake(work, specs, cluster, name), env_for(tmp, cluster), log)
    if code != 0:
        print(f"workflow failed (status {code}): see {log}")
        print(log.read_text()[-3000:])
        return
    records = [json.loads(p.read_text()) for p in (work / "results" / name / "runs").glob("*.json")]
    starts = [_ts(r["started_at"]) for r in records]
    ends = [_ts(r["finished_at"]) for r in records]
    makespan = max(ends) - min(starts)
    per_lane = math.ceil(runs / pairs)
    ideal = per_lane * duration_s
    lanes: dict[int, list[dict[str, Any]]] = {}
    for r in records:
        lanes.setdefault(r["scheduling"]["lane"], []).append(r)
    overheads = []
    for lane_runs in lanes.values():
        t0 = min(_ts(r["started_at"]) for r in lane_runs)
        t1 = max(_ts(r["finished_at"]) for r in lane_runs)
        overheads.append((t1 - t0) / len(lane_runs) - duration_s)
    waited = [r["scheduling"]["waited_s"] for r in records]
    by_pair: dict[str, int] = {}
    for r in records:
        by_pair[r["host_pair"]] = by_pair.get(r["host_pair"], 0) + 1
    status = {s: sum(1 for r in records if r["status"] == s) for s in ("ok", "failed")}
    print(f"records: {len(records)} ({status['ok']} ok, {status['failed']} failed) on {len(by_pair)} pairs")
    print(f"makespan of the runs: {makespan:.1f} s; ideal {per_lane} × {duration_s:g} s = {ideal:.1f} s")
    print(f"makespan / ideal: {makespan / ideal:.3f}")
    overheads.sort()
    median = overheads[len(overheads) // 2]
    print(
        f"scheduler overhead per run (lane time / runs − duration): median {median:.2f} s,"
        f" max {overheads[-1]:.2f} s"
    )
    print(f"lease wait per run: median {sorted(waited)[len(waited) // 2]:.3f} s, max {max(waited):.3f} s")
    print(f"whole workflow (build check, runs, ingest, report): {wall:.1f} s")
    print(
        f"controller peak RSS: snakemake alone {watch.hwm_mb:.0f} MB"
        f" (with its largest job process: {max(rss, watch.hwm_mb):.0f} MB)"
    )
    own = watch.cpu_s
    print(
        f"controller CPU per run: {cpu / runs:.2f} s in all (snakemake {own / runs:.2f} s,"
        f" its job processes {(cpu - own) / runs:.2f} s);"
        f" {pairs} pairs of {duration_s:g} s runs need {pairs / duration_s * cpu / runs:.2f} CPUs of it"
    )
    # The run processes report their own CPU (demuxlab-run, start-up included: scheduling.runner_cpu_s);
    # the rest of the job processes' CPU is the sweep's fixed jobs (database, report, claims), paid once.
    runner = [r["scheduling"].get("runner_cpu_s") for r in records]
    if all(isinstance(x, (int, float)) for x in runner):
        run_cpu = sum(runner) / runs
        fixed = cpu - own - sum(runner)
        print(
            f"controller cost per run: {own / runs + run_cpu:.3f} CPU-s (snakemake {own / runs:.3f},"
            f" the run process {run_cpu:.3f}: median {sorted(runner)[len(runner) // 2]:.3f}, max"
            f" {max(runner):.3f}); fixed jobs of the sweep {fixed:.1f} CPU-s in all"
            f" ({fixed / runs:.3f} per run at this sweep's size)"
        )
    loads = watch.loads or [os.getloadavg()[0]]
    print(
        f"(this machine: {os.cpu_count()} CPUs, shared; 1-min load average during the sweep: mean"
        f" {sum(loads) / len(loads):.1f}, max {max(loads):.1f}, {os.getloadavg()[0]:.1f} at the end)"
    )


def profile_list(text: str) -> list[str]:
    """A comma list of workflows/ profiles."""
    names = [p for p in text.split(",") if p]
    if not names or not all((REPO / "workflows" / p / "config.yaml").is_file() for p in names):
        raise argparse.ArgumentTypeError(f"a comma list of profiles of workflows/, got {text!r}")
    return names


def main(argv: Sequence[str] | None = None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--runs", type=positive_int, default=80)
    ap.add_argument("--pairs", type=positive_int, default=8)
    ap.add_argument("--duration-s", type=positive_float, default=20.0)
    ap.add_argument("--dag-runs", type=int_list, default=[2500, 5000, 10000])
    ap.add_argument("--dag-pairs", type=positive_int, default=64)
    ap.add_argument(
        "--dag-profiles", type=profile_list, default="cluster,local", help="Profiles whose DAG to build."
    )
    ap.add_argument("--skip-dag", action="store_true")
    ap.add_argument("--skip-sweep", action="store_true")
    args = ap.parse_args(argv)
    resource.setrlimit(resource.RLIMIT_NOFILE, (4096, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    with tempfile.TemporaryDirectory(prefix="demuxlab-i9-bench-") as tmp:
        if not args.skip_dag:
            dag_figures(
                Path(tmp),
                args.dag_runs,
                args.dag_pairs,
                args.dag_profiles,
            )
        if not args.skip_sweep:
            sweep_figures(Path(tmp), args.runs, args.pairs, args.duration_s)


if __name__ == "__main__":
    entry(main)
