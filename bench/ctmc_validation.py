"""CTMC validation benchmark (issue 10, seed 001 Fig. 3): measured vs calibrated vs paper throughput.

A light runner for bare many-core hosts: it needs only the static binaries (build/bin, or
$DEMUXLAB_BIN_DIR) and a plain Python with numpy, scipy and numba — no PostgreSQL, no network, no
installed package (it imports demuxlab's calibration and prediction code from src/). Per pattern × work:

1. calibration runs: the instrumented server at the lowest concurrency (HSHA 2 threads, LF 1);
2. the project's ``calibrate()`` fits the rates from their exit JSON (a refused fit is reported, and that
   pattern's calibrated column stays empty);
3. the measured sweep: every thread count, uninstrumented;
4. the project's ``predict_many()`` predicts each point from the paper's and the calibrated rates.

Server and client are pinned with the project's own planner (``demuxlab.plan``: halves of the NUMA nodes,
else of the physical cores; the server gets the first half), the client gets one thread per CPU of its
half. Prints one row per pattern × work × threads and the mean and max |error| per rates source.
Target on a ≥ 16-core host: calibrated mean |error| ≤ 6 %, max ≤ 15 % (issue 10).

    python bench/ctmc_validation.py                                   # the issue's sweep (~8 min on 2 cores)
    python bench/ctmc_validation.py --threads 1-4 --work 10 --duration 2 --warmup 1   # a quick look
    python bench/ctmc_validation.py --json out.json                   # also every figure as JSON
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from images_lib import REPO, BenchError, Server, load_parser, main_guard, print_table, run_pair

sys.path.insert(0, str(REPO / "src"))

from demuxlab.ctmc.calibrate import calibrate
from demuxlab.ctmc.predict import PredictRequest, predict_many
from demuxlab.ctmc.rates import Rates, min_threads
from demuxlab.errors import DemuxlabError
from demuxlab.plan import plan_pinning
from demuxlab.topology import collect_facts

TARGET_MEAN, TARGET_MAX = 0.06, 0.15


def int_list(text: str) -> list[int]:
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return sorted(out)


def cpu_list(cpus: tuple[int, ...]) -> str:
    return ",".join(map(str, cpus))


def main() -> None:
    ap = load_parser(__doc__, duration=5.0)
    ap.add_argument("--patterns", default="hsha,lf")
    ap.add_argument("--notifier", default="epoll-lt")
    ap.add_argument("--work", default="10,20,50", help="work per message, µs (comma list)")
    ap.add_argument("--threads", default="1-8", help="total threads, e.g. 1-8 or 2,4,8")
    ap.add_argument("--connections", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=1, help="measured runs per point (mean reported)")
    ap.add_argument("--calib-duration", type=float, default=None, help="seconds per calibration run")
    ap.add_argument("--calib-repeats", type=int, default=1)
    ap.add_argument("--method", default="ssa", choices=["ssa", "fluid", "exact"])
    ap.add_argument("--rel-ci", type=float, default=0.01, help="SSA target relative CI")
    ap.add_argument("--jobs", type=int, default=0, help="prediction processes (0: one per CPU)")
    ap.add_argument("--json", dest="json_out", help="write every figure here as JSON")
    a = ap.parse_args()
    patterns = a.patterns.split(",")
    works = [float(w) for w in a.work.split(",")]
    threads = int_list(a.threads)
    calib_s = a.calib_duration or a.duration

    facts = collect_facts()
    biggest = max(threads)
    plan = plan_pinning(facts, facts, biggest, 1, True)
    server_cpus, client_cpus = plan.server_cpus, plan.client_cpus
    client_threads = len(client_cpus)
    host = (
        f"{facts.get('hostname')}: {facts.get('cpu_model')}, {facts.get('cores')} cores, "
        f"{len(facts.get('numa_nodes') or [])} NUMA node(s), kernel {facts.get('kernel')}"
    )
    print(f"# host {host}", flush=True)
    print(
        f"# server CPUs {cpu_list(server_cpus)}, client CPUs {cpu_list(client_cpus)} "
        f"({client_threads} client threads), {a.connections} connections, "
        f"{a.duration:g} s measured (+{a.warmup:g} s warm-up) per run",
        flush=True,
    )
    if plan.oversubscribed:
        print(f"# oversubscribed: {biggest} server threads on {len(server_cpus)} CPU(s)", flush=True)

    def run(pattern: str, t: int, work: float, instrument: bool, duration: float) -> Any:
        cmd = Server(pattern, a.notifier, t, cpus=cpu_list(server_cpus), instrument=instrument, work_us=work)
        return run_pair(
            cmd,
            connections=a.connections,
            warmup=a.warmup,
            duration=duration,
            client_threads=client_threads,
            client_cpu=cpu_list(client_cpus),
        )

    t0 = time.monotonic()
    rates: dict[str, Rates | None] = {}
    refused: dict[str, str] = {}
    calib_tput: dict[tuple[str, float], float] = {}
    measured: dict[tuple[str, float, int], float] = {}
    for pattern in patterns:
        # As the workflow does: calibration runs at every work, pooled into one fit per pattern.
        lo = min_threads(pattern)
        results = []
        for work in works:
            runs = [run(pattern, lo, work, True, calib_s) for _ in range(a.calib_repeats)]
            calib_tput[(pattern, work)] = statistics.mean(r.throughput for r in runs)
            print(f"# calibration run {pattern} w{work:g} t{lo}: {calib_tput[(pattern, work)]:,.0f} msg/s")
            results += runs
        try:
            # With the measured throughputs the fit must also predict its own runs within 10 % (self-check).
            rates[pattern] = calibrate(
                [r.server for r in results], pattern, measured=[r.throughput for r in results]
            )
        except DemuxlabError as exc:
            rates[pattern] = None
            refused[pattern] = exc.message
        r = rates[pattern]
        fitted = (
            " ".join(f"1/{k}={1 / v:.3g}µs" for k, v in r.as_dict().items())
            if r
            else f"REFUSED: {refused[pattern]}"
        )
        print(f"# calibrated {pattern}: {fitted}", flush=True)
    for pattern in patterns:
        for work in works:
            for t in threads:
                if t < min_threads(pattern):
                    continue
                tputs = [run(pattern, t, work, False, a.duration).throughput for _ in range(a.repeats)]
                measured[(pattern, work, t)] = statistics.mean(tputs)
                print(f"# {pattern} w{work:g} t{t}: {measured[(pattern, work, t)]:,.0f} msg/s", flush=True)
    measure_s = time.monotonic() - t0

    keys = sorted(measured)
    reqs: list[PredictRequest] = []
    slots: list[tuple[tuple[str, float, int], str]] = []
    for key in keys:
        pattern, work, t = key
        for source, r in (("paper", None), ("calibrated", rates.get(pattern))):
            if source == "calibrated" and r is None:
                continue
            reqs.append(
                PredictRequest(
                    pattern, t, work, a.connections, method=a.method, rates=r, rel_ci=a.rel_ci, seed=0
                )
            )
            slots.append((key, source))
    t1 = time.monotonic()
    preds = predict_many(reqs, jobs=a.jobs)
    predict_s = time.monotonic() - t1
    model: dict[tuple[tuple[str, float, int], str], float] = {
        slot: p.throughput_msgs_per_s for slot, p in zip(slots, preds, strict=True)
    }

    rows = []
    errors: dict[str, list[float]] = {"paper": [], "calibrated": []}
    per: dict[tuple[str, str], list[float]] = {}
    for key in keys:
        pattern, work, t = key
        m = measured[key]
        row: list[object] = [pattern, f"{work:g}", t, m]
        for source in ("paper", "calibrated"):
            p = model.get((key, source))
            if p is None:
                row += ["-", "-"]
                continue
            err = (p - m) / m
            errors[source].append(abs(err))
            per.setdefault((pattern, source), []).append(abs(err))
            row += [p, f"{err * 100:+.1f}%"]
        rows.append(row)
    print()
    print(f"{a.notifier}, {a.connections} connections, method {a.method}; host {host}")
    print(f"server CPUs {cpu_list(server_cpus)}, client CPUs {cpu_list(client_cpus)}")
    print_table(
        ["pattern", "work µs", "threads", "measured", "paper", "paper err", "calibrated", "calib err"], rows
    )
    print()
    summary = []
    for source in ("paper", "calibrated"):
        for pattern in [*patterns, "all"]:
            errs = errors[source] if pattern == "all" else per.get((pattern, source), [])
            if errs:
                summary.append(
                    [source, pattern, len(errs), f"{statistics.mean(errs):.1%}", f"{max(errs):.1%}"]
                )
    print_table(["rates", "pattern", "points", "mean |error|", "max |error|"], summary)
    if errors["calibrated"]:
        mean_e, max_e = statistics.mean(errors["calibrated"]), max(errors["calibrated"])
        ok = mean_e <= TARGET_MEAN and max_e <= TARGET_MAX
        print(
            f"calibrated: mean |error| {mean_e:.1%}, max {max_e:.1%} (target ≤ {TARGET_MEAN:.0%} / "
            f"≤ {TARGET_MAX:.0%} on a ≥ 16-core host): {'met' if ok else 'NOT met'}"
        )
    for pattern, why in sorted(refused.items()):
        print(f"calibration of {pattern} refused: {why}")
    print(f"measured in {measure_s:.0f} s, predicted in {predict_s:.0f} s")
    if a.json_out:
        doc = {
            "host": facts,
            "server_cpus": list(server_cpus),
            "client_cpus": list(client_cpus),
            "args": vars(a),
            "calibration_throughput": {f"{p}/w{w:g}": v for (p, w), v in calib_tput.items()},
            "rates_per_us": {p: (r.as_dict() if r else None) for p, r in rates.items()},
            "refused": refused,
            "points": [
                {
                    "pattern": k[0],
                    "work_us": k[1],
                    "threads": k[2],
                    "measured": measured[k],
                    "paper": model.get((k, "paper")),
                    "calibrated": model.get((k, "calibrated")),
                }
                for k in keys
            ],
        }
        Path(a.json_out).write_text(json.dumps(doc, indent=1) + "\n")


def guarded() -> None:
    try:
        main()
    except DemuxlabError as exc:  # the project's own one-line errors (pinning, rates)
        raise BenchError(exc.message) from None


if __name__ == "__main__":
    main_guard(guarded)
