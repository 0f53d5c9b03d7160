"""Orchestration overhead of the remote launcher on the testbed (or any inventory), and runs per minute
with 1 pair vs all pairs.

For ``--runs`` runs of a short point (reactor/poll, 8 connections, ``--measure-s`` s), each through
``demuxlab run-point --pairs-from INVENTORY --launcher remote`` (the workflow's command), it prints the
record's ``orchestration_s`` (wall time outside the phases: docker over SSH on both hosts, start, stop,
cleanup; target ≤ 5 s), the noise check's time, and the whole command's wall time; then the same runs
spread over every pair at once (one process per pair) and the runs per minute of both.

    .venv/bin/python bench/cluster_remote_bench.py [--inventory playbooks/inventories/testbed]
        [--runs 4] [--measure-s 1]

Needs a provisioned testbed (`demuxlab testbed up`, then site.yml). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMUXLAB = str(Path(sys.executable).with_name("demuxlab"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--inventory", default=str(REPO / "playbooks" / "inventories" / "testbed"))
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--measure-s", type=float, default=1.0)
    args = ap.parse_args()
    from demuxlab.cluster.pairs import load_pairs

    if not Path(args.inventory).exists():
        print(f"no inventory at {args.inventory}: `demuxlab testbed up` (then site.yml) first; skipped")
        return
    pairs = load_pairs(args.inventory).pairs
    with tempfile.TemporaryDirectory(prefix="demuxlab-i9-remote-") as tmp_s:
        tmp = Path(tmp_s)
        spec = tmp / "rbench.yaml"
        spec.write_text(
            "name: rbench\nreproduces: none\nlauncher: docker\nseed: 1\n"
            f"repeats: {args.runs * 2}\n"
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

        def one(rid: str, lane: int) -> tuple[float, dict[str, object]]:
            out = tmp / "runs" / f"{rid}.json"
            t0 = time.monotonic()
            subprocess.run(
                [DEMUXLAB, "run-point", str(spec), "--run-id", rid, "--out", str(out), "--pairs-from",
                 args.inventory, "--launcher", "remote", "--cluster-state", str(state), "--lane", str(lane),
                 "--noise-wait", "0", "--quarantine-after", "0"],
                env=env, capture_output=True, check=False,
            )  # fmt: skip
            return time.monotonic() - t0, json.loads(out.read_text())

        t0 = time.monotonic()
        single = [one(rid, 0) for rid in rids[: args.runs]]
        single_s = time.monotonic() - t0
        t0 = time.monotonic()
        with ThreadPoolExecutor(max_workers=len(pairs)) as pool:
            multi = list(pool.map(lambda ir: one(ir[1], ir[0]), enumerate(rids[args.runs : args.runs * 2])))
        multi_s = time.monotonic() - t0
    recs = [r for _, r in single + multi]
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
    walls = sorted(w for w, _ in single)
    print(f"run-point wall per run (1 pair): median {statistics.median(walls):.1f} s")
    print(
        f"runs per minute: 1 pair {len(single) / single_s * 60:.1f},"
        f" {len(pairs)} pairs {len(multi) / multi_s * 60:.1f}"
    )
    print(
        f"(this machine: {os.cpu_count()} CPUs shared by the testbed hosts and others;"
        f" load {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    main()
