#!/usr/bin/env python3
"""Fuzzing campaign: hostile experiment specs (``validate`` + ``plan``) and run records (``ingest``'s
checks), counted per class: clear / accepted / wrongly accepted / traceback / hang.

A third kind, ``reingest``, needs PostgreSQL (``DEMUXLAB_DATABASE_URL``'s server, else the embedded
cluster; a throw-away database is made and dropped): the base record is stored, then records of the same
run that differ as reruns, retries or careless edits do (and the record variants above) are ingested as
``demuxlab ingest`` does, without ``--replace``. A refusal must leave every table as it was, an
acceptance the stored run's rows as they were; anything else is wrongly accepted (``--reingests 0``: no
database needed).

Each variant runs in a forked child with a wall-clock limit (``--timeout``, a "hang" past it) and an
address-space limit (``--memory-mb``; a child killed for memory counts as a hang too). Variants are
seeded (``--seed``): the same command gives the same variants. Prints one table and, per non-clear
class, a few examples. Exit status 1 when any variant is a traceback, wrongly accepted or a hang.

    .venv/bin/python -m bench fuzz_inputs --specs 2000 --records 1000
"""

from __future__ import annotations

import os
import random
import resource
import signal
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

from bench.common.cli import entry, nonnegative_int, parser, positive_float, positive_int
from bench.fuzz import cases

CLASSES = ("clear", "accepted", "wrongly_accepted", "traceback", "hang")


def run_isolated(func, arg, timeout: float, memory_mb: int) -> tuple[str, str, float, float]:  # type: ignore[no-untyped-def]
    """``func(arg)`` in a forked child: (class, detail, wall seconds, CPU seconds of the child)."""
    r, w = os.pipe()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:  # child
        os.close(r)
        cpu0 = time.process_time()
        try:
            limit = memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            cls, detail = func(arg)
        except BaseException as exc:
            cls, detail = "traceback", f"{type(exc).__name__} in the harness: {exc}"[:300]
        cpu = time.process_time() - cpu0
        os.write(w, f"{cpu:.4f}\t{cls}\t{detail}".encode()[:4000])
        os._exit(0)
    os.close(w)
    deadline = t0 + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(r)
            return "hang", f"more than {timeout:g} s", time.monotonic() - t0, timeout
        time.sleep(0.002)
    data = os.read(r, 4096).decode(errors="replace")
    os.close(r)
    elapsed = time.monotonic() - t0
    if not data:
        return "hang", f"child died (status {status}; out of memory?)", elapsed, elapsed
    used, cls, detail = data.split("\t", 2)
    return cls, detail, elapsed, float(used)


def special_spec_files(tmp: Path) -> list[tuple[str, Path]]:
    fifo = tmp / "fifo.yaml"
    os.mkfifo(fifo)
    link = tmp / "zero.yaml"
    link.symlink_to("/dev/zero")
    folder = tmp / "folder.yaml"
    folder.mkdir()
    return [
        ("FIFO", fifo),
        ("symlink to /dev/zero", link),
        ("/dev/zero", Path("/dev/zero")),
        ("/dev/null", Path("/dev/null")),
        ("directory", folder),
        ("missing", tmp / "missing.yaml"),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--specs", type=nonnegative_int, default=1500, help="spec variants")
    ap.add_argument("--records", type=nonnegative_int, default=800, help="run record variants")
    ap.add_argument(
        "--reingests", type=nonnegative_int, default=200, help="records of a stored run (needs PostgreSQL)"
    )
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument("--timeout", type=positive_float, default=10.0, help="seconds before a variant is a hang")
    ap.add_argument("--memory-mb", type=positive_int, default=2048, help="address space of each variant")
    ap.add_argument("--examples", type=nonnegative_int, default=5, help="examples shown per non-clear class")
    args = ap.parse_args(argv)

    # Import everything a variant may use once, here: the forked children inherit it.
    import demuxlab.ctmc.rates
    import demuxlab.ingest
    import demuxlab.spec  # noqa: F401

    rng = random.Random(args.seed)
    pairs = cases.contract_pairs()
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    examples: dict[str, list[str]] = defaultdict(list)
    slowest: dict[str, float] = defaultdict(float)
    over_1s: Counter[str] = Counter()
    over_1s_cpu: Counter[str] = Counter()

    def record(kind: str, what: str, cls: str, detail: str, elapsed: float, cpu: float) -> None:
        counts[kind][cls] += 1
        slowest[kind] = max(slowest[kind], cpu)
        over_1s[kind] += elapsed > 1.0
        if cpu > 1.0:
            over_1s_cpu[kind] += 1
            if len(examples[f"{kind}/over 1 s of CPU"]) < args.examples:
                examples[f"{kind}/over 1 s of CPU"].append(f"{what}: {cpu:.2f} s, {cls}")
        if cls not in ("clear", "accepted") and len(examples[f"{kind}/{cls}"]) < args.examples:
            examples[f"{kind}/{cls}"].append(f"{what}: {detail}")

    with tempfile.TemporaryDirectory(prefix="dlx-fuzz-") as tmpdir:
        tmp = Path(tmpdir)
        t0 = time.monotonic()
        for i in range(args.specs):
            what, data = cases.spec_variant(rng)
            name = what.split(":", 1)[0]
            folder = tmp / f"s{i}"
            folder.mkdir()
            path = folder / f"{name}.yaml"
            path.write_bytes(data)
            cls, detail, elapsed, cpu = run_isolated(
                lambda p: cases.classify_spec(p, pairs), path, args.timeout, args.memory_mb
            )
            record("spec", what, cls, detail, elapsed, cpu)
            path.unlink()
            folder.rmdir()
        for what, path in special_spec_files(tmp):
            cls, detail, elapsed, cpu = run_isolated(
                lambda p: cases.classify_spec(p, pairs), path, args.timeout, args.memory_mb
            )
            record("spec", what, cls, detail, elapsed, cpu)
        spec_s = time.monotonic() - t0

        t0 = time.monotonic()
        for i in range(args.records):
            what, data = cases.record_variant(rng)
            path = tmp / f"r{i}.json"
            path.write_bytes(data)
            cls, detail, elapsed, cpu = run_isolated(
                cases.classify_record, path, args.timeout, args.memory_mb
            )
            record("record", what, cls, detail, elapsed, cpu)
            path.unlink()
        fifo = tmp / "fifo.json"
        os.mkfifo(fifo)
        for what, path in (("FIFO", fifo), ("/dev/zero", Path("/dev/zero"))):
            cls, detail, elapsed, cpu = run_isolated(
                cases.classify_record, path, args.timeout, args.memory_mb
            )
            record("record", what, cls, detail, elapsed, cpu)
        record_s = time.monotonic() - t0

        t0 = time.monotonic()
        if args.reingests:
            with cases.scratch_database() as url:
                for i in range(args.reingests):
                    what, data = cases.rerun_variant(rng) if i % 2 == 0 else cases.record_variant(rng)
                    path = tmp / f"again{i}.json"
                    path.write_bytes(data)
                    cls, detail, elapsed, cpu = run_isolated(
                        lambda p: cases.classify_reingest(p, url), path, args.timeout, args.memory_mb
                    )
                    record("reingest", what, cls, detail, elapsed, cpu)
                    path.unlink()
        reingest_s = time.monotonic() - t0

    print(f"fuzz campaign: seed {args.seed}, timeout {args.timeout:g} s, {args.memory_mb} MiB per variant")
    head = f"{'input':8} {'total':>6} " + " ".join(f"{c:>17}" for c in CLASSES)
    print(head + f" {'>1s wall':>9} {'>1s CPU':>8} {'max CPU':>8}")
    for kind in ("spec", "record", "reingest"):
        if not counts[kind]:
            continue
        c = counts[kind]
        print(
            f"{kind:8} {sum(c.values()):6d} "
            + " ".join(f"{c[k]:17d}" for k in CLASSES)
            + f" {over_1s[kind]:9d} {over_1s_cpu[kind]:8d} {slowest[kind]:7.2f}s"
        )
    print(
        f"time: specs {spec_s:.1f} s, records {record_s:.1f} s, reingests {reingest_s:.1f} s "
        "(a shared machine: times are indicative)"
    )
    for key, lines in sorted(examples.items()):
        print(f"\n{key}:")
        for line in lines:
            print(f"  {line[:300]}")
    bad = sum(counts[k][c] for k in counts for c in ("wrongly_accepted", "traceback", "hang"))
    return 1 if bad else 0


if __name__ == "__main__":
    entry(main)
