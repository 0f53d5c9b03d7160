"""CTMC benchmark: simulation and fluid time per point, and the full grid (prints figures).

    .venv/bin/python bench/ctmc_bench.py [--rel-ci 0.01] [--seed 0] [--connections 512]

Targets (docs/ctmc.md): SSA median ≤ 0.5 s per point to a 1 % CI, fluid ≤ 20 ms per point, the grid of
both patterns × N = 1–16 × work 10/20/50 µs ≤ 30 s. The numba compile is timed separately (once per
process and model).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from demuxlab.ctmc.engine import compile_structure
from demuxlab.ctmc.predict import predict
from demuxlab.ctmc.rates import build, min_threads, structure


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rel-ci", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--connections", type=int, default=512)
    args = ap.parse_args()

    t0 = time.perf_counter()
    for p in ("hsha", "lf"):
        k = compile_structure(structure(p))
        m = build(p, 2, 10.0, 4)
        k.ssa_run(m.initial.copy(), m.r, 0, 1, 1.0, 10, np.random.default_rng(0))
        k.drift(m.initial.copy(), m.r, 1e-2, np.empty(len(m.initial)))
    compile_s = time.perf_counter() - t0
    print(f"numba compile (both models): {compile_s:.2f} s")

    works = (10.0, 20.0, 50.0)
    grid: dict[tuple[str, float, int], tuple[float, float, float]] = {}
    ssa_t: list[float] = []
    fluid_t: list[float] = []
    not_conv = 0
    t_grid = time.perf_counter()
    for p in ("hsha", "lf"):
        for w in works:
            for n in range(min_threads(p), 17):
                t = time.perf_counter()
                s = predict(
                    p, n, w, method="ssa", rel_ci=args.rel_ci, seed=args.seed, connections=args.connections
                )
                ssa_t.append(time.perf_counter() - t)
                not_conv += not s.details["converged"]
                t = time.perf_counter()
                f = predict(p, n, w, method="fluid", connections=args.connections)
                fluid_t.append(time.perf_counter() - t)
                grid[(p, w, n)] = (
                    s.throughput_msgs_per_s,
                    s.ci_halfwidth_rel or 0.0,
                    f.throughput_msgs_per_s,
                )
    total = time.perf_counter() - t_grid

    print(f"points: {len(ssa_t)} (SSA not converged: {not_conv})")
    print(
        f"SSA per point to {args.rel_ci:.0%} CI: median {statistics.median(ssa_t):.3f} s, "
        f"p90 {sorted(ssa_t)[int(0.9 * len(ssa_t))]:.3f} s, max {max(ssa_t):.3f} s"
    )
    print(
        f"fluid per point: median {statistics.median(fluid_t) * 1000:.1f} ms, "
        f"p90 {sorted(fluid_t)[int(0.9 * len(fluid_t))] * 1000:.1f} ms, max {max(fluid_t) * 1000:.1f} ms"
    )
    print(f"grid total (SSA + fluid, without compile): {total:.1f} s")
    print()
    print("predicted throughput, msgs/s (SSA ± rel CI | fluid)")
    header = f"{'N':>3} " + " ".join(
        f"{p + ' w' + format(w, 'g'):>24}" for p in ("hsha", "lf") for w in works
    )
    print(header)
    for n in range(1, 17):
        cells = []
        for p in ("hsha", "lf"):
            for w in works:
                v = grid.get((p, w, n))
                cells.append(f"{'-':>24}" if v is None else f"{v[0]:>8.0f} ±{v[1] * 100:4.2f}% |{v[2]:>7.0f}")
        print(f"{n:>3} " + " ".join(cells))


if __name__ == "__main__":
    main()
