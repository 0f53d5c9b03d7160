#!/usr/bin/env python3
"""The adaptive replay benchmark (issue 20, docs/adaptive.md): the adaptive policy of a spec over the run
records of its full fixed design, each mechanism alone and all three together, against the full design.

    .venv/bin/python -m bench adaptive_replay experiments/adaptive-grid.yaml --records DIR [--loads CSV]
        [--targets repeats=0.25,steady=0.1,points=0.2]
    .venv/bin/python -m bench adaptive_replay     # the shipped data set (bench/data/adaptive/)

Prints, per configuration: run-minutes (adaptive / full, and the saving), the claims' verdicts that agree,
the best design per workload that agrees (exactly, and within the full design's statistical ties), and
the largest gap between the adaptive and the full figure at measured points in units of the full design's
95 % half-width, with how many measured points lie outside the full interval. Then, for all three
together, the run-minutes each mechanism saved (points never measured, repeats not run, seconds not
measured), which add up to the total saving. With ``--loads`` (bench/fidelity/adaptive_data.py's loads.csv) it
also gives the load average the data were taken under. ``--targets`` replaces the spec's ``target_rel`` of
the mechanisms named (a noisy host's scatter needs wider targets than a quiet testbed's).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import statistics
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench import REPO
from bench.common.cli import OptionError, entry, parser

SHIPPED = REPO / "bench" / "data" / "adaptive" / "adaptive-grid.tar.xz"
CONFIGS = (
    ("repeats", ("repeats",)),
    ("steady", ("steady",)),
    ("points", ("points",)),
    ("all three", ("repeats", "steady", "points")),
)


MECHANISMS = ("repeats", "steady", "points")


def targets(text: str) -> dict[str, float]:
    """--targets: ``mechanism=share`` pairs, a share in (0, 1)."""
    out: dict[str, float] = {}
    for item in filter(None, text.split(",")):
        name, _, value = item.partition("=")
        try:
            share = float(value)
        except ValueError:
            share = float("nan")
        if name not in MECHANISMS or not 0 < share < 1:
            raise argparse.ArgumentTypeError(
                f"mechanism=share pairs, a mechanism of {', '.join(MECHANISMS)} and a share in (0, 1), "
                f"got {item!r}"
            )
        out[name] = share
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = parser(__doc__)
    ap.add_argument("spec", nargs="?", default=str(REPO / "experiments" / "adaptive-grid.yaml"))
    ap.add_argument("--records", type=Path, help="default: bench/data/adaptive/adaptive-grid.tar.xz's")
    ap.add_argument("--loads", type=Path, help="loads.csv of adaptive_data")
    ap.add_argument("--no-models", action="store_true", help="guide the points by the measurements only")
    ap.add_argument("--targets", type=targets, default={}, help="e.g. repeats=0.25,steady=0.1,points=0.2")
    args = ap.parse_args(argv)
    for option in ("records", "loads"):
        path = getattr(args, option)
        if path is not None and not path.exists():
            ap.error(f"--{option}: {path} does not exist")
    with tempfile.TemporaryDirectory(prefix="dlx-replay-") as tmp:
        if args.records is None:  # the shipped data set (`make bench`)
            with tarfile.open(SHIPPED) as tar:
                tar.extractall(tmp, filter="data")
            args.records = Path(tmp) / "adaptive-grid" / "runs"
            args.loads = args.loads or Path(tmp) / "adaptive-grid" / "loads.csv"
        return run(args)


def run(args: argparse.Namespace) -> int:
    from demuxlab.adaptive.policy import design_of
    from demuxlab.adaptive.records import read_runs
    from demuxlab.adaptive.replay import Replay, replay
    from demuxlab.spec import load_checked_spec

    spec = load_checked_spec(args.spec)
    if spec.adaptive is None:
        raise OptionError(f"{args.spec}: the spec has no adaptive block (the replay needs one)")
    settings = spec.adaptive
    for name, share in args.targets.items():
        rule = getattr(settings, name)
        if rule is None:
            raise OptionError(f"--targets: {name} is off in the spec {args.spec} (its adaptive.{name})")
        settings = dataclasses.replace(settings, **{name: dataclasses.replace(rule, target_rel=share)})
    print(f"targets: {', '.join(f'{m} ±{getattr(settings, m).target_rel:.0%}' for m in settings.mechanisms)}")
    runs = read_runs(args.records)
    print(f"spec {args.spec}, {len(runs)} records in {args.records}")
    if args.loads:
        try:
            with args.loads.open() as fh:
                loads = [float(row["load1_before"]) for row in csv.DictReader(fh)]
        except (OSError, KeyError, TypeError, ValueError) as exc:
            raise OptionError(f"--loads: {args.loads}: not a loads.csv of adaptive_data ({exc!r})") from None
        if not loads:
            raise OptionError(f"--loads: {args.loads}: no runs in it")
        print(
            f"load average (1 min) before each run while the data were taken: median "
            f"{statistics.median(loads):.1f}, min {min(loads):.1f}, max {max(loads):.1f} (2 CPUs)"
        )
    header = (
        f"{'mechanisms':<11} {'run-min':>8} {'full':>6} {'saving':>7} {'runs':>9} {'points':>7} "
        f"{'verdicts':>9} {'best':>6} {'best~':>6} {'gap':>5} {'out':>4} {'rounds':>6} {'s':>5}"
    )
    print(header)
    results: dict[str, Replay] = {}
    for name, mechanisms in CONFIGS:
        t0 = time.perf_counter()
        rep = replay(
            design_of(spec, settings.only(mechanisms)),
            runs,
            models=not args.no_models,
            experiment=spec.name,
            spec_sha256=spec.sha256,
        )
        took = time.perf_counter() - t0
        results[name] = rep
        c = rep.comparison
        big = c.largest_gap
        print(
            f"{name:<11} {c.adaptive_s / 60:8.1f} {c.full_s / 60:6.1f} {c.saving:6.2f}x "
            f"{c.runs:>4}/{c.full_runs:<4} {c.points:>3}/{c.full_points:<3} "
            f"{c.verdicts_agree:>4}/{len(c.verdicts):<4} {c.best_agree:>2}/{len(c.best):<3} "
            f"{c.best_tied:>2}/{len(c.best):<3} {big[1] if big else float('nan'):5.2f} {c.outside:>4} "
            f"{c.rounds:>6} {took:5.1f}"
        )
    rep = results["all three"]
    design = rep.design
    runs_done = rep.adaptive.runs
    by_point: dict[str, int] = {}
    for r in runs_done:
        by_point[r.point.point_key] = by_point.get(r.point.point_key, 0) + 1
    never = [p for p in design.points if p.point_key not in by_point]
    points_s = len(never) * design.repeats * design.run_s
    repeats_s = sum(
        (design.repeats - by_point[p.point_key]) * design.run_s
        for p in design.points
        if p.point_key in by_point
    )
    steady_s = sum(spec.phases.measure_s - r.measured_s for r in runs_done if not r.point.instrument)
    total = rep.comparison.full_s - rep.comparison.adaptive_s
    print(
        "all three, run-minutes saved by each mechanism (they add up to the saving): "
        f"points never measured {points_s / 60:.1f} ({len(never)} of {len(design.points)} points), "
        f"repeats not run {repeats_s / 60:.1f}, seconds not measured (steady) {steady_s / 60:.1f}; "
        f"total {total / 60:.1f} of {rep.comparison.full_s / 60:.1f}"
    )
    print(f"all three, stop: {rep.comparison.stop}")
    for cl, host, full, adaptive in rep.comparison.verdicts:
        mark = "" if full == adaptive else "   <- differs"
        print(f"  verdict {cl:<28} {host:<10} full: {full:<13} adaptive: {adaptive}{mark}")
    for _host, wl, full, adaptive, tied in rep.comparison.best:
        mark = "" if full == adaptive else ("   (tied in the full design)" if tied else "   <- differs")
        print(f"  best    {wl:<52} full: {full:<22} adaptive: {adaptive}{mark}")
    if rep.shapes.notes:
        print("  models: " + "; ".join(n for n in rep.shapes.notes if "no model" not in n))
    return 0


if __name__ == "__main__":
    entry(main)
