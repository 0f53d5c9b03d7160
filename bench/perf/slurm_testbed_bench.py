"""The slurm profile on a real Slurm (the testbed's, `make testbed SLURM=1`, or its own with --testbed): the
real workflow (`snakemake --profile slurm all`, Snakemake's Slurm executor plugin, sacct), one sweep per pair
count of ``--pairs`` (``slurm.pairs``: runs in flight at once), short runs. Per sweep it prints:

* **jobs submitted** (distinct Slurm jobs of the records: ⌈runs / K⌉ plus retries with ``slurm.group_runs``
  K, 0 by default: a lane's runs up to an hour, one job) and **between two runs of one job** (a run's
  start minus the end of the run before it in its job: the job's Snakemake, the run's jobstep, the facts);
* **submission → server start**: from the job's SubmitTime (Slurm's) to the server's start (the record's
  ``started_at``) of the first run of each job: queue wait, the plugin's jobstep (Snakemake, twice, on the
  node), the facts step;
* **orchestration per run**: the lane's time per run beyond the run's phases (everything between two runs
  of a lane: the plugin noticing the end (sacct, its check interval), submission, the job's start-up, the
  facts step, stopping), and the launcher's own ``orchestration_s``;
* **runs per minute** (runs ÷ makespan of the runs) and **makespan / ideal** (ideal: ⌈runs / pairs⌉ × the
  run's phases), as bench/perf/cluster_sim_bench.py prints for the simulated cluster;
* **the controller's CPU per run** (Snakemake with the plugin's sbatch/sacct calls and the local rules),
  split into what grows with the runs (the controller while runs are in flight, first submission to the
  last run's end) and what a sweep costs once (parsing, DAG, build, plan, database, settings check before;
  report, claims, nodes.csv after), and the load average during the sweep.

    .venv/bin/python -m bench slurm_testbed_bench [--testbed] [--pairs 1,2] [--runs 8] [--measure-s 2]

Without --testbed it needs the testbed's Slurm up (`make testbed SLURM=1`; $SLURM_CONF, else
.demuxlab/testbed/slurm/slurm.conf) and works under .demuxlab/bench-slurm (shared with the hosts). With
--testbed it brings up a Slurm testbed of its own (2 pairs) and removes it at the end. Prints figures;
asserts nothing (the testbed's nodes share this machine's CPUs and its load: say so when reporting).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

from bench import REPO
from bench.common.cli import entry, int_list, parser, positive_float, positive_int
from bench.perf.cluster_sim_bench import timed

SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))


def write_spec(folder: Path, name: str, runs: int, measure_s: float) -> int:
    repeats = max(1, math.ceil(runs / 2))
    (folder / f"{name}.yaml").write_text(
        f"name: {name}\nreproduces: none\nlauncher: native\nseed: 5\nrepeats: {repeats}\n"
        f"phases: {{warmup_s: 0.5, measure_s: {measure_s:g}, cooldown_s: 0}}\ncalibration: {{repeats: 0}}\n"
        "designs:\n  - {pattern: reactor, notifiers: [poll, epoll-lt]}\n"
        "matrix: {threads: [1], work_us: [0], connections: [8], msg_size: [1]}\n"
    )
    return 2 * repeats


def _ts(text: str) -> float:
    if text.endswith("Z"):
        return datetime.strptime(text.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()  # Slurm's times (UTC here)


@contextlib.contextmanager
def own_testbed(work: Path) -> Iterator[str]:
    from demuxlab import testbed as tb
    from demuxlab.slurm import testbed as slurm_testbed

    os.environ["DEMUXLAB_TESTBED_DIR"] = str(work / "state")
    os.environ["DEMUXLAB_TESTBED_INVENTORY"] = str(work / "inventory")
    try:
        state = slurm_testbed.up(2, log=lambda m: None, shared=(str(work),))
        print(f"testbed: {len(state['hosts'])} Slurm nodes up; slurm up in {state['slurm']['up_s']} s")
        yield str(state["slurm"]["conf"])
    finally:
        tb.down()


def sweep(work: Path, conf: str, pairs: int, runs_wanted: int, measure_s: float) -> None:
    name = f"benchslurm{pairs}"
    specs = work / "specs"
    specs.mkdir(parents=True, exist_ok=True)
    runs = write_spec(specs, name, runs_wanted, measure_s)
    wdir = work / f"work-{pairs}"
    shutil.rmtree(wdir, ignore_errors=True)
    wdir.mkdir(parents=True)
    cmd = [
        SNAKEMAKE, "--profile", "slurm", "all", "--directory", str(wdir), "--config",
        f"experiments=[{name}]", f"experiments_dir={specs}", f"slurm={{pairs: {pairs}}}",
        "cluster={noise_wait_s: 0}",
    ]  # fmt: skip
    env = {**os.environ, "SLURM_CONF": conf}
    log = work / f"{name}.log"
    wall, _, code, cpu, watch = timed(cmd, env, log)
    if code != 0:
        print(f"{pairs} pair(s): workflow failed (status {code}): see {log}")
        print(log.read_text()[-3000:])
        return
    records = [json.loads(p.read_text()) for p in (wdir / "results" / name / "runs").glob("*.json")]
    phases = 0.5 + measure_s
    submit = [_ts(r["slurm"]["submit_time"]) for r in records]
    start = [_ts(r["started_at"]) for r in records]
    end = [_ts(r["finished_at"]) for r in records]
    by_job: dict[int, list[tuple[float, float]]] = {}
    for r, s0, e0 in zip(records, start, end, strict=True):
        by_job.setdefault(int(r["slurm"]["job_id"]), []).append((s0, e0))
    gaps = sorted(
        b[0] - a[1]
        for runs_ in by_job.values()
        for a, b in zip(sorted(runs_)[:-1], sorted(runs_)[1:], strict=True)
    )
    firsts = {job: min(runs_)[0] for job, runs_ in by_job.items()}
    to_server = sorted(
        s - q
        for r, s, q in zip(records, start, submit, strict=True)
        if s == firsts[int(r["slurm"]["job_id"])]
    )
    makespan = max(end) - min(submit)
    per_lane = math.ceil(runs / pairs)
    overhead = makespan / per_lane - phases
    orch = sorted(float(r["orchestration_s"]) for r in records if r.get("orchestration_s") is not None)
    setup = sorted(float(r["scheduling"]["job_setup_s"]) for r in records)
    loads = watch.loads or [os.getloadavg()[0]]
    ok = sum(1 for r in records if r["status"] == "ok")
    print(f"\n{pairs} pair(s): {len(records)} runs ({ok} ok) of {phases:g} s (warm-up + measure)")
    print(
        f"jobs submitted: {len(by_job)} for {len(records)} runs; between two runs of one job: "
        + (
            f"median {statistics.median(gaps):.1f} s, max {max(gaps):.1f} s"
            if gaps
            else "none (one run a job)"
        )
    )
    print(
        f"submission -> server start (a job's first run): median {statistics.median(to_server):.1f} s,"
        f" max {max(to_server):.1f} s"
        f" (the facts step of the job: median {statistics.median(setup):.1f} s)"
    )
    print(
        f"orchestration per run (lane time per run beyond the phases): {overhead:.1f} s;"
        f" the launcher's own orchestration_s: median {statistics.median(orch):.2f} s, max {max(orch):.2f} s"
    )
    print(f"runs per minute: {len(records) / makespan * 60:.2f} (makespan {makespan:.0f} s)")
    print(f"makespan / ideal: {makespan / (per_lane * phases):.2f} ({per_lane} runs per lane x {phases:g} s)")
    print(
        f"controller CPU per run: {cpu / len(records):.2f} s in all (snakemake and the plugin"
        f" {watch.cpu_s / len(records):.2f} s); whole workflow {wall:.0f} s"
    )
    # What grows with the runs: the controller while runs are in flight (first submission to the last run's
    # end: the plugin's sbatch/sacct, the scheduling, the ingests in its threads), apart from what a sweep
    # costs once (parsing, the DAG, build, plan, database, settings check; the reports after the runs).
    own_in, jobs_in = watch.cpu_between(min(submit), max(end))
    fixed = cpu - own_in - jobs_in
    print(
        f"controller CPU while the runs are in flight: {(own_in + jobs_in) / len(records):.3f} s per run"
        f" (snakemake {own_in / len(records):.3f} s, its jobs {jobs_in / len(records):.3f} s);"
        f" once per sweep: {fixed:.1f} s (before the first submission and after the last run)"
    )
    print(f"(load average during the sweep: mean {sum(loads) / len(loads):.1f}, max {max(loads):.1f})")


def main(argv: Sequence[str] | None = None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--testbed", action="store_true", help="bring up (and remove after) a Slurm testbed")
    ap.add_argument("--pairs", type=int_list, default=[1, 2], help="pair counts, one sweep each")
    ap.add_argument("--runs", type=positive_int, default=8)
    ap.add_argument("--measure-s", type=positive_float, default=2.0)
    args = ap.parse_args(argv)
    counts = args.pairs
    if args.testbed:
        tmp = tempfile.mkdtemp(prefix="demuxlab-slurm-bench-", dir=str(REPO / ".demuxlab"))
        try:
            with own_testbed(Path(tmp)) as conf:
                for n in counts:
                    sweep(Path(tmp), conf, n, args.runs, args.measure_s)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    conf = os.environ.get("SLURM_CONF") or str(REPO / ".demuxlab" / "testbed" / "slurm" / "slurm.conf")
    work = REPO / ".demuxlab" / "bench-slurm"
    for n in counts:
        sweep(work, conf, n, args.runs, args.measure_s)


if __name__ == "__main__":
    entry(main)
