#!/usr/bin/env python3
"""Make the data of the adaptive replay benchmark: every run of a spec's full fixed design, in its
randomized order, through `demuxlab run-point` on the local pair (docs/adaptive.md).

    .venv/bin/python -m bench adaptive_data bench/data/adaptive/adaptive-grid.yaml --out build/adaptive-grid

Resumable: a run whose record exists is not run again. Next to the records it writes ``loads.csv``: per
run the load average before it started, its wall time and niceness, because this machine is shared and
the load is part of what the data say. ``--nice N`` runs each `run-point` (and so its server and client)
at that niceness (e.g. -10: the measured processes get most of their CPUs' time against the other work on
a shared host, as on a dedicated one). ``--pack FILE.tar.xz`` packs the records, the spec and loads.csv.
"""

from __future__ import annotations

import csv
import subprocess
import tarfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench import REPO
from bench.common.cli import entry, parser

DEMUXLAB = REPO / ".venv" / "bin" / "demuxlab"


def main(argv: Sequence[str] | None = None) -> int:
    from demuxlab.spec import load_checked_spec, run_id, run_order

    ap = parser(__doc__)
    ap.add_argument("spec")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--pack", type=Path, help="pack the records, spec and loads into this .tar.xz")
    ap.add_argument(
        "--nice",
        type=int,
        choices=range(-20, 20),
        metavar="N",
        default=0,
        help="niceness of the runs (negative: higher priority)",
    )
    args = ap.parse_args(argv)
    spec = load_checked_spec(args.spec)
    runs_dir = args.out / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    facts = args.out / "server-facts.json"
    if not facts.exists():
        facts.write_bytes(subprocess.run([str(DEMUXLAB), "facts"], check=True, capture_output=True).stdout)
    loads = args.out / "loads.csv"
    new = not loads.exists()
    order = run_order(spec)
    with loads.open("a", newline="") as fh:
        w = csv.writer(fh)
        if new:
            w.writerow(["run_id", "point_key", "repeat", "started", "load1_before", "wall_s", "rc", "nice"])
        for i, (point, repeat) in enumerate(order):
            rid = run_id(spec, point, repeat)
            record = runs_dir / f"{rid}.json"
            if record.exists():
                continue
            load1 = Path("/proc/loadavg").read_text().split()[0]
            t0 = time.time()
            cmd = [
                *(["nice", "-n", str(args.nice)] if args.nice else []),
                str(DEMUXLAB),
                "run-point",
                args.spec,
                "--run-id",
                rid,
                "--point-key",
                point.point_key,
                "--repeat",
                str(repeat),
                "--out",
                str(record),
                "--server-facts",
                str(facts),
            ]
            rc = subprocess.run(cmd, check=False, capture_output=True).returncode
            wall = time.time() - t0
            w.writerow(
                [
                    rid,
                    point.point_key,
                    repeat,
                    time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t0)),
                    load1,
                    f"{wall:.2f}",
                    rc,
                    args.nice,
                ]
            )
            fh.flush()
            print(
                f"{i + 1}/{len(order)} {point.point_key} r{repeat} rc={rc} {wall:.1f}s load {load1}",
                flush=True,
            )
    if args.pack:
        with tarfile.open(args.pack, "w:xz") as tar:
            tar.add(args.spec, arcname=Path(args.spec).name)
            tar.add(loads, arcname="loads.csv")
            for record in sorted(runs_dir.glob("*.json")):
                tar.add(record, arcname=f"runs/{record.name}")
    return 0


if __name__ == "__main__":
    entry(main)
