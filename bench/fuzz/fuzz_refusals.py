#!/usr/bin/env python3
"""Issue 23's inputs, refused: how long each refusal takes and the one line it prints.

Each case runs twice: through the command line as a user types it (``demuxlab validate``, ``plan``,
``ingest``: a new process, so the wall time includes Python's start-up and imports), and in-process (the
library call the command makes: ``load_spec``, ``ingest_files``; median of ``--repeat`` calls), which is
the cost of the check itself. The records go into a throw-away database (``DEMUXLAB_DATABASE_URL``'s
server, else the embedded cluster) that holds the good run they would replace; after each refusal every
table is compared with its state before (``db same``). Prints one row per case and the message.

    .venv/bin/python -m bench fuzz_refusals
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from bench import REPO
from bench.common.cli import entry, parser, positive_int
from bench.fuzz import cases

DEMUXLAB = str(Path(sys.executable).with_name("demuxlab"))
TINY = (REPO / "tests" / "integration" / "specs" / "tiny.yaml").read_text()


def cli(
    args: list[str], env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """Run ``demuxlab ARGS`` as typed: (result, wall seconds, CPU seconds of the process)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run([DEMUXLAB, *args], capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return res, wall, cpu


def spec_cases() -> list[tuple[str, str]]:
    return [
        ("%YAML 1.3", "%YAML 1.3\n---\n" + TINY),
        ("%YAML 1.2", "%YAML 1.2\n---\n" + TINY),
        ("lone surrogate", TINY.replace('description: "Workflow', 'description: "Workflow \\ud800')),
        ("NUL escape", TINY.replace("reproduces: none", 'reproduces: "none\\0"')),
    ]


def record_cases() -> list[tuple[str, dict[str, Any], tuple[str, ...]]]:
    good = cases.base_record()

    def edited(change: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
        record = cases.base_record()
        change(record)
        return record

    failed = edited(
        lambda r: r.update(status="failed", failure_reason="demux-client: stalled", client=None, stats=None)
    )
    return [
        ("ok, no samples", edited(lambda r: r["client"].update(per_second=[])), ()),
        ("ok, no stats", edited(lambda r: r.update(stats=None)), ()),
        ("ok, throughput x2", edited(lambda r: r["stats"].update(throughput_msgs_per_s=162462.8)), ()),
        ("failed over ok", failed, ()),
        ("lone surrogate", edited(lambda r: r.update(host_pair="pair \ud800")), ()),
        ("same record", good, ()),  # not a refusal: a no-op, said so
        ("failed, --replace", failed, ("--replace",)),  # not a refusal: replaced on purpose
    ]


def main(argv: Sequence[str] | None = None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--repeat", type=positive_int, default=5, help="in-process calls per case (median)")
    args = ap.parse_args(argv)

    from sqlalchemy import create_engine

    from demuxlab.designs import valid_pairs
    from demuxlab.errors import DemuxlabError
    from demuxlab.ingest import ingest_files
    from demuxlab.spec import load_spec

    load = os.getloadavg()
    print(f"refusals of issue 23 (load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})")
    head = f"{'input':10} {'case':18} {'command':9} {'in-process':>10} {'CLI wall':>9} {'CLI CPU':>8}"
    print(f"{head} {'exit':>4} {'db same':>7}")
    pairs = valid_pairs()
    worst_inproc = 0.0
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="dlx-refusals-") as tmpdir:
        tmp = Path(tmpdir)
        for i, (case, text) in enumerate(spec_cases()):
            folder = tmp / f"s{i}"
            folder.mkdir()
            path = folder / "tiny.yaml"
            path.write_text(text)
            for command in ("validate", "plan"):
                times = []
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    with contextlib.suppress(DemuxlabError):
                        load_spec(path, pairs=pairs)
                    times.append(time.perf_counter() - t0)
                res, wall, cpu = cli([command, str(path)])
                inproc = statistics.median(times)
                worst_inproc = max(worst_inproc, inproc)
                print(
                    f"{'spec':10} {case:18} {command:9} {inproc * 1e3:8.1f}ms {wall:8.2f}s {cpu:7.2f}s "
                    f"{res.returncode:4d} {'-':>7}"
                )
                lines.append(f"{case} ({command}): " + " / ".join(res.stderr.splitlines()))

        with cases.scratch_database() as url:
            env = {**os.environ, "DEMUXLAB_DATABASE_URL": url}
            engine = create_engine(url)
            try:
                for i, (case, record, flags) in enumerate(record_cases()):
                    path = tmp / f"r{i}.json"
                    path.write_text(json.dumps(record))
                    replace: Literal["always", "never"] = "always" if flags else "never"
                    times = []
                    with engine.connect() as conn:
                        before = cases.table_rows(conn)
                    for _ in range(args.repeat if not flags else 0):
                        t0 = time.perf_counter()
                        with contextlib.suppress(DemuxlabError):
                            ingest_files([path], engine=engine, check_schema=False, replace=replace)
                        times.append(time.perf_counter() - t0)
                    res, wall, cpu = cli(["ingest", *flags, str(path)], env)
                    with engine.connect() as conn:
                        same = cases.table_rows(conn) == before
                    inproc = statistics.median(times) if times else float("nan")
                    if times:
                        worst_inproc = max(worst_inproc, inproc)
                    print(
                        f"{'record':10} {case:18} {'ingest':9} {inproc * 1e3:8.1f}ms {wall:8.2f}s "
                        f"{cpu:7.2f}s {res.returncode:4d} {'yes' if same else 'no':>7}"
                    )
                    lines.append(
                        f"{case} (ingest{' ' + ' '.join(flags) if flags else ''}): "
                        + " / ".join(res.stderr.splitlines())
                    )
            finally:
                engine.dispose()
    print(
        f"slowest in-process check: {worst_inproc * 1e3:.1f} ms "
        "(the CLI's wall and CPU include Python's start-up and imports; a shared machine)"
    )
    print("\nwhat each printed (stderr):")
    for line in lines:
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    entry(main)
