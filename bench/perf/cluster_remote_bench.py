"""Orchestration overhead of the remote launcher on the testbed (or any inventory), and runs per minute
on 1, 2, … pairs.

For ``--runs`` runs of a short point (reactor/poll, 8 connections, ``--measure-s`` s), each through
``demuxlab run-point --pairs-from INVENTORY --launcher remote`` (the workflow's command), it prints the
record's ``orchestration_s`` (wall time outside the phases: docker over SSH on both hosts, start, stop,
cleanup; target ≤ 5 s), the noise check's time, and the whole command's wall time; then the same runs
spread over every pair at once (one process per pair) and the runs per minute of both.

With ``--scaling 1,2,4`` it measures runs per minute on the first 1, 2 and 4 pairs of the inventory instead
(``--runs`` runs per pair count, one run in flight per pair: a worker per pair, each taking the next run
of the list, as the workflow's lanes do) and prints the ratios to 1 pair and the load average.
``--testbed 4`` brings up a testbed of its own with that many pairs (a temporary folder, `make testbed`
untouched), provisions it with site.yml and removes it at the end:

    .venv/bin/python -m bench cluster_remote_bench --testbed 4 --scaling 1,2,4 --runs 12

    .venv/bin/python -m bench cluster_remote_bench [--inventory playbooks/inventories/testbed]
        [--runs 4] [--measure-s 1]

Without --testbed it needs a provisioned testbed (`demuxlab testbed up`, then site.yml). Prints figures;
asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from bench import REPO
from bench.common.cli import OptionError, entry, int_list, parser, positive_float, positive_int

DEMUXLAB = str(Path(sys.executable).with_name("demuxlab"))


def main(argv: Sequence[str] | None = None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--inventory", default=str(REPO / "playbooks" / "inventories" / "testbed"))
    ap.add_argument("--runs", type=positive_int, default=4)
    ap.add_argument("--measure-s", type=positive_float, default=1.0)
    ap.add_argument(
        "--scaling", type=int_list, help="pair counts to compare, e.g. 1,2,4 (runs per minute on each)"
    )
    ap.add_argument(
        "--testbed", type=positive_int, help="bring up (and remove after) a testbed of this many pairs"
    )
    args = ap.parse_args(argv)
    if args.testbed:
        with own_testbed(args.testbed) as inventory:
            args.inventory = str(inventory)
            bench(args)
    else:
        bench(args)


@contextlib.contextmanager
def own_testbed(pairs: int) -> Iterator[Path]:
    """A testbed of ``pairs`` pairs in a temporary folder, provisioned with site.yml; removed at the end."""
    from demuxlab import testbed as tb
    from demuxlab.launch.docker import IMAGES

    work = Path(tempfile.mkdtemp(prefix="demuxlab-i9-scale-"))
    os.environ["DEMUXLAB_TESTBED_DIR"] = str(work / "state")
    os.environ["DEMUXLAB_TESTBED_INVENTORY"] = str(work / "inventory")
    try:
        t0 = time.monotonic()
        state = tb.up(pairs, log=lambda m: None)
        print(f"testbed: {len(state['hosts'])} hosts up in {time.monotonic() - t0:.1f} s")
        for role in ("server", "client"):
            if subprocess.run(["docker", "image", "inspect", IMAGES[role]], capture_output=True).returncode:
                subprocess.run(
                    ["bash", str(REPO / "images/build-image.sh"), role], check=True, capture_output=True
                )
        extra = {
            "images_names": [IMAGES["server"], IMAGES["client"]],
            "images_cache_dir": str(work / "images"),
            "host_facts_dir": str(work / "facts"),
            "host_facts_store": False,
        }
        t0 = time.monotonic()
        proc = subprocess.run(
            [str(Path(sys.executable).with_name("ansible-playbook")), "-i", str(work / "inventory"),
             "site.yml", "-e", json.dumps(extra)],
            cwd=REPO / "playbooks", capture_output=True, text=True, check=False,
            env={**os.environ, "ANSIBLE_NOCOLOR": "1"},
        )  # fmt: skip
        if proc.returncode != 0:
            sys.exit(f"cluster_remote_bench: site.yml failed:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
        print(f"testbed: site.yml on {len(state['hosts'])} hosts in {time.monotonic() - t0:.1f} s")
        yield work / "inventory"
    finally:
        tb.down()
        shutil.rmtree(work, ignore_errors=True)


def sub_inventory(inventory: str, count: int, where: Path) -> str:
    """An inventory file with only the first ``count`` pairs of ``inventory`` (its hosts.yml)."""
    src = Path(inventory)
    doc = yaml.safe_load((src / "hosts.yml" if src.is_dir() else src).read_text())
    children = doc["all"]["children"]["demuxlab_pairs"]["children"]
    doc["all"]["children"]["demuxlab_pairs"]["children"] = dict(list(children.items())[:count])
    out = where / f"pairs-{count}" / "hosts.yml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(out.parent)


def bench(args: argparse.Namespace) -> None:
    from demuxlab.remote.hostpairs import load_pairs

    if not Path(args.inventory).exists():
        raise OptionError(
            f"--inventory: no inventory at {args.inventory}: `make testbed` first, or --testbed N"
        )
    pairs = load_pairs(args.inventory).pairs
    counts = args.scaling or [1, len(pairs)]
    if any(not 1 <= c <= len(pairs) for c in counts):
        raise OptionError(f"--scaling: {','.join(map(str, counts))}: the inventory has {len(pairs)} pairs")
    with tempfile.TemporaryDirectory(prefix="demuxlab-i9-remote-") as tmp_s:
        tmp = Path(tmp_s)
        spec = tmp / "rbench.yaml"
        spec.write_text(
            "name: rbench\nreproduces: none\nlauncher: docker\nseed: 1\n"
            f"repeats: {args.runs * len(counts)}\n"
            f"phases: {{warmup_s: 0, measure_s: {args.measure_s:g}, cooldown_s: 0}}\n"
            "calibration: {repeats: 0}\ndesigns:\n  - {pattern: reactor, notifiers: [poll]}\n"
            "matrix: {threads: [1], work_us: [0], connections: [8], msg_size: [1]}\n"
        )
        plan = subprocess.run([DEMUXLAB, "plan", str(spec)], capture_output=True, text=True, check=True)
        rids = [r["run_id"] for r in json.loads(plan.stdout)["runs"]]
        state = tmp / "cluster"
        for host in {h.name for p in pairs for h in p.hosts}:
            subprocess.run(
                [DEMUXLAB, "cluster", "facts", "--inventory", args.inventory, "--host", host,
                 "--out", str(state / "facts" / f"{host}.json")],
                check=True,
            )  # fmt: skip
        env = {**os.environ, "DEMUXLAB_LEASE_DIR": str(tmp / "leases")}

        def one(rid: str, lane: int, inventory: str) -> tuple[float, dict[str, object]]:
            out = tmp / "runs" / f"{rid}.json"
            t0 = time.monotonic()
            subprocess.run(
                [DEMUXLAB, "run-point", str(spec), "--run-id", rid, "--out", str(out), "--pairs-from",
                 inventory, "--launcher", "remote", "--cluster-state", str(state), "--lane", str(lane),
                 "--noise-wait", "0", "--quarantine-after", "0"],
                env=env, capture_output=True, check=False,
            )  # fmt: skip
            return time.monotonic() - t0, json.loads(out.read_text())

        def on_pairs(count: int, batch: list[str]) -> tuple[float, list[tuple[float, dict[str, object]]]]:
            """``batch`` on the first ``count`` pairs: one worker per pair, each taking the next run."""
            inventory = args.inventory if count == len(pairs) else sub_inventory(args.inventory, count, tmp)
            queue = list(enumerate(batch))
            lock = threading.Lock()
            done: list[tuple[float, dict[str, object]]] = []

            def worker(lane: int) -> None:
                while True:
                    with lock:
                        if not queue:
                            return
                        _, rid = queue.pop(0)
                    result = one(rid, lane, inventory)
                    with lock:
                        done.append(result)

            t0 = time.monotonic()
            with ThreadPoolExecutor(max_workers=count) as pool:
                list(pool.map(worker, range(count)))
            return time.monotonic() - t0, done

        per_count: dict[int, tuple[float, list[tuple[float, dict[str, object]]], tuple[float, ...]]] = {}
        cpu: dict[int, float] = {}
        for i, count in enumerate(counts):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            elapsed, done = on_pairs(count, rids[i * args.runs : (i + 1) * args.runs])
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            per_count[count] = (elapsed, done, os.getloadavg())
            # CPU of the controller's side of the runs: run-point, its docker CLIs and ssh processes.
            cpu[count] = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / len(done)
    recs = [r for _, done, _ in per_count.values() for _, r in done]
    ok = [r for r in recs if r["status"] == "ok"]
    orch = sorted(float(r["orchestration_s"]) for r in ok if r.get("orchestration_s") is not None)  # type: ignore[arg-type]
    print(f"remote runs: {len(ok)} ok of {len(recs)} ({args.measure_s:g} s measure each)")
    for r in recs:
        if r["status"] != "ok":
            print(f"  failed on {r['host_pair']}: {r['failure_reason']}")
    if orch:
        print(
            f"orchestration_s per run: median {statistics.median(orch):.2f} s,"
            f" max {orch[-1]:.2f} s (target 5 s)"
        )
    noise = [float(r["noise"]["waited_s"]) for r in ok if isinstance(r.get("noise"), dict)]  # type: ignore[index]
    if noise:
        print(f"noise check per run: median {statistics.median(noise):.2f} s")
    rate: dict[int, float] = {}
    for count, (elapsed, done, load) in per_count.items():
        walls = sorted(w for w, _ in done)
        used = sorted({str(r["host_pair"]) for _, r in done})
        rate[count] = len(done) / elapsed * 60
        print(
            f"{count} pair(s): {len(done)} runs in {elapsed:.1f} s = {rate[count]:.1f} runs/min;"
            f" run-point wall median {statistics.median(walls):.1f} s; pairs used {','.join(used)};"
            f" controller CPU {cpu[count]:.2f} s per run;"
            f" load average after {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
        )
    base = counts[0]
    ratios = ", ".join(f"{c}/{base} = {rate[c] / rate[base]:.2f}" for c in counts[1:])
    if ratios:
        print(f"runs per minute ratios: {ratios}")
    print(
        f"(this machine: {os.cpu_count()} CPUs shared by the testbed hosts, the controller and others;"
        f" load {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    entry(main)
