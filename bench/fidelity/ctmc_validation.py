"""CTMC validation benchmark (issues 10, 19; seed 001 Fig. 3): measured vs calibrated vs paper throughput,
for every pattern × notifier of one or more experiment specs, and the error table per pattern.

    .venv/bin/python -m bench ctmc_validation --spec bench/fidelity/specs/embedded-multicore-short.yaml \\
        --spec bench/fidelity/specs/proactor-echo-short.yaml --spec experiments/smoke.yaml \\
        --patterns-of-smoke hsha,lf

It needs the static binaries (build/bin, or $DEMUXLAB_BIN) and the demuxlab package (its native
launcher runs each pair, bench/common/pairs.py) — no database, no network. Per spec:

1. the points: every design × notifier × threads (cut to the pair's range, and to --threads) × work ×
   connections × size of the spec, and per (pattern, notifier, connections, size, work) one calibration
   point at the pattern's calibration concurrency (rates.calibration_threads), instrumented;
2. every run, in rounds (round i: the i-th run of every point, in a seeded random order), server and
   client pinned by the project's planner
   (``demuxlab.plan``: halves of the NUMA nodes, else of the physical cores; the client gets the spec's
   client threads); with --max-background, a run during which other processes used more than that share
   of the host's CPUs (from /proc/stat, less the server's and the client's own CPU time) is run again, up
   to --retries times (each after waiting up to --quiet-wait s for a quiet host), and the least disturbed
   run is kept — if it is within the limit: a run still over it after its tries is left out (printed, and
   kept in the --runs-out file's ``disturbed`` list, not its ``runs``), since a calibration that pools it
   or a point that averages it describes the other processes, not the server;
3. ``calibrate()`` per (pattern, notifier, connections, size), pooling the work values, with the plain runs of
   the calibration points (the same setting, uninstrumented: each role's CPU per message and the server's
   speed, and the self-check against their throughput; issue 43; --no-plain: from the instrumented runs alone)
   and the clients' CPU times (a refused fit is printed with its reason and self-check figure and leaves the
   calibrated column empty), and ω: what a request costs the client more when it wakes a dispatcher asleep in
   its notifier (HSHA, proactor), and the hand-off of a released lock to a waiter asleep on it (uring-shared's
   submission lock), both measured by build/bin/wake-cost from the client's first CPU to the server's before
   the runs and kept with them (--wake-us, --handoff-us give them, 0 charges none);
4. ``predict_many()`` for every measured point from the paper's and the calibrated rates, on the host the
   runs had: the server's cores (the planner's CPUs), the client's threads and cores.

--runs-out keeps every run (server and client JSON) and --replay calibrates and predicts them again, a
model change against the same measurements (with the file's --max-background unless one is given: a run
kept over it by an older bench is left out); --probe adds one instrumented run of every point beyond the
calibration concurrency to them (what the server did there: calls per message, each role's CPU and waits).
On a lent machine with little time: --measure-only stops after the runs (--replay predicts them elsewhere),
--time-limit S starts no run after S seconds (the --runs-out file is rewritten after every run, so it holds
what ran; a point with less work than any of its calibration's runs had is then not predicted from it, and
the bench says so), --keep-going reports a failed run and goes on (docs/ctmc-reference.md, "On 16 cores").
--sleeps also counts, at the points whose calibration fitted the client's sleeps (r_u: every design but
uring and uring-shared, whose sends run in the kernel inside their notifier call),
how often the chain's client sleeps per message (its ``send_wake`` step, SSA) against the client's own
count (its report's ``sleeps``): where a point's error comes from the send's wake-ups, these differ.

**Generalisation** (issue 43): --calibrate-from FILE calibrates on another --runs-out file's calibration
runs (and the plain runs of their points) and predicts the measured or --replay'ed points with them: a
grid of another day, never tuned on (the points' own calibration runs are fitted too, the "same day"
column, for comparison only); bench/fidelity/specs/generalise-{calibration,heldout}.yaml are the two grids:

    .venv/bin/python -m bench ctmc_validation --spec bench/fidelity/specs/generalise-calibration.yaml \
        --runs-out /tmp/cal.json.gz --measure-only
    .venv/bin/python -m bench ctmc_validation --spec bench/fidelity/specs/generalise-heldout.yaml \
        --runs-out /tmp/heldout.json.gz --calibrate-from /tmp/cal.json.gz [--ablate pace,speed,r_x,...]

--ablate P,Q,… also prints the calibrated error with each part of a calibration left out in turn
(``demuxlab.ctmc.calibrate.ABLATIONS``: the rate ablation of docs/ctmc.md).

Prints one row per point, then mean and max |error| per pattern × notifier × rates source, per pattern
and overall, with the host, the load average before and after, and the measured background CPU. Targets
(issue 19): on a 2-core host calibrated mean |error| ≤ 10 %, max ≤ 25 %; on ≥ 16 cores ≤ 6 % / ≤ 15 %.

Without --spec the old manual sweep runs (--patterns, --notifier, --work, --threads, --connections).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gzip
import json
import os
import random
import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from bench import REPO
from bench.common.cli import (
    BenchError,
    OptionError,
    entry,
    nonnegative_float,
    nonnegative_int,
    positive_float,
    positive_int,
    print_table,
)
from bench.common.pairs import CpuTimes, Result, RoundTrip, Server, build_helper, load_parser, run_pair
from bench.fidelity.ctmc_fits import (
    Ablation,
    CalKey,
    Fitted,
    Source,
    ablate,
    at_run_share,
    cal_key,
    calibration_inputs,
    errors,
    fit_all,
    overall,
    predictions,
    print_ablation,
    print_status,
    summary_rows,
)
from demuxlab.ctmc.calibrate import ABLATIONS
from demuxlab.ctmc.rates import DESIGNS, calibration_threads
from demuxlab.errors import DemuxlabError
from demuxlab.launch.wake import measure_wake
from demuxlab.plan import plan_pinning
from demuxlab.point import Point as SpecPoint
from demuxlab.topology import collect_facts
from demuxlab.vocab import NOTIFIERS

# The options that decide the points: a replay takes them from the runs' file.
POINT_ARGS: tuple[str, ...] = ("spec", "patterns", "only", "patterns_of_smoke", "notifier", "work", "threads")
POINT_ARGS += ("connections", "client_threads")
TARGETS = {"2-core": (0.10, 0.25), "16-core": (0.06, 0.15), "held-out": (0.08, 0.20)}
# The manual grid's options (without --spec) and their defaults: with --spec each but --threads (there a
# filter) is an error.
MANUAL_DEFAULTS: dict[str, Any] = {
    "patterns": "hsha,lf", "notifier": "epoll-lt", "work": "10,20,50", "connections": 512, "threads": "1-8",
}  # fmt: skip


@dataclass(frozen=True)
class Point(SpecPoint):
    """A spec's point (``demuxlab.point.Point``, closed loop here) and the spec it came from."""

    spec: str = ""

    @property
    def calibrates(self) -> bool:
        """An instrumented run at the pattern's calibration concurrency (a --probe run is at another)."""
        return self.instrument and self.threads == calibration_threads(self.pattern)

    @property
    def workload(self) -> tuple[str, str, str, int, int]:
        """What a calibration is fitted per: pattern, notifier, connections, size (work is pooled)."""
        return (self.spec, self.pattern, self.notifier, self.connections, self.msg_size)

    def label(self) -> str:
        return (
            f"{self.pattern}/{self.notifier} t{self.threads} w{self.work_us:g} c{self.connections} "
            f"b{self.msg_size}" + (" instr" if self.instrument else "")
        )


class Kept(NamedTuple):
    """A run as kept: both reports, the share of the CPUs other processes used, and the cross-CPU round
    trip (ns) before and after it (None where not measured)."""

    result: Result
    background: float
    round_trip: tuple[float, float] | None = None

    def far(self, limit_ns: float | None) -> bool:
        """Whether the CPUs were far apart: a round trip, before or after, above ``limit_ns``."""
        return limit_ns is not None and self.round_trip is not None and max(self.round_trip) > limit_ns


def int_list(text: str) -> list[int]:
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return sorted(out)


def _kept(check: Any, what: str) -> Any:
    """An option type that checks the text (``check`` raises ValueError or returns False on a bad one) and
    keeps it as written: the points' options go into the --runs-out file as text, for --replay."""

    def convert(text: str) -> str:
        try:
            ok = check(text) is not False
        except (ValueError, KeyError):
            ok = False
        if not ok:
            raise argparse.ArgumentTypeError(f"{what}, got {text!r}")
        return text

    convert.__name__ = what
    return convert


def _patterns(text: str) -> bool:
    return all(p in DESIGNS for p in text.split(","))


def _works(text: str) -> bool:
    return all(float(w) >= 0 for w in text.split(","))


def _threads(text: str) -> bool:
    values = int_list(text)
    return bool(values) and min(values) >= 1


def _ablations(text: str) -> bool:
    return all(part in ABLATIONS for part in text.split(","))


ABLATION_LIST = _kept(_ablations, f"a comma list of parts ({', '.join(ABLATIONS)})")
PATTERN_LIST = _kept(_patterns, f"a comma list of patterns ({', '.join(DESIGNS)})")
WORK_LIST = _kept(_works, "a comma list of µs >= 0")
THREAD_LIST = _kept(_threads, "thread counts >= 1, e.g. 1-4,8")


def cpu_list(cpus: tuple[int, ...]) -> str:
    return ",".join(map(str, cpus))


def spec_points(
    path: str, threads_filter: set[int] | None, patterns: set[str] | None, client_threads: int | None = None
) -> tuple[list[Point], dict[str, Any]]:
    """The measured and calibration points of a spec (its phases alongside); ``client_threads`` replaces
    the spec's client's threads (a 16-core spec's 8 on a 2-core host)."""
    from demuxlab.spec import expand_points, load_checked_spec

    spec = load_checked_spec(path)
    measured: list[Point] = []
    for p in expand_points(spec):
        if p.instrument or p.rate is not None:
            continue
        if patterns is not None and p.pattern not in patterns:
            continue
        if threads_filter is not None and p.threads not in threads_filter:
            continue
        fields = {**dataclasses.asdict(p), "instrument": False}
        if client_threads is not None:
            fields["client_threads"] = client_threads
        measured.append(Point(**fields, spec=spec.name))
    calib = sorted(
        {dataclasses.replace(m, threads=calibration_threads(m.pattern), instrument=True) for m in measured},
        key=lambda p: p.label(),
    )
    phases = {"warmup": spec.phases.warmup_s, "duration": spec.phases.measure_s, "repeats": spec.repeats}
    return calib + measured, phases


def manual(
    pattern: str, notifier: str, threads: int, work: float, conns: int, instrument: bool = False
) -> Point:
    """A point of the command line's grid: 1-byte messages, closed loop."""
    return Point(pattern, notifier, threads, work, conns, 1, 0, None, instrument, spec="manual")


def manual_points(a: Any) -> list[Point]:
    pts: list[Point] = []
    for pattern in a.patterns.split(","):
        for work in (float(w) for w in a.work.split(",")):
            lo = calibration_threads(pattern)
            pts.append(manual(pattern, a.notifier, lo, work, a.connections, instrument=True))
            d = DESIGNS[pattern]
            for t in int_list(a.threads):
                if t >= d.min_threads and (d.max_threads is None or t <= d.max_threads):
                    pts.append(manual(pattern, a.notifier, t, work, a.connections))
    return pts


def wait_for_quiet(limit: float, patience_s: float) -> None:
    """Wait (at most ``patience_s``) for half a second in which the host's CPUs were busy less than
    ``limit`` of the time (nothing of ours runs between the runs)."""
    deadline = time.monotonic() + patience_s
    while time.monotonic() < deadline:
        a = CpuTimes()
        time.sleep(0.5)
        if a.split(CpuTimes())[0] < limit:
            return


def background_share(before: CpuTimes, after: CpuTimes, wall: float, ours_cpu_s: float) -> float:
    """The share of the host's CPUs other processes used over ``wall`` seconds: /proc/stat's busy time
    less the server's and the client's own CPU seconds."""
    ncpu = os.cpu_count() or 1
    return max(before.busy_s(after) - ours_cpu_s, 0.0) / (ncpu * wall)


def save_runs(
    path: str,
    a: Any,
    facts: dict[str, Any],
    load_before: tuple[float, ...],
    results: dict[Point, list[Kept]],
    wake: Wake | None = None,
    disturbed: list[tuple[Point, Kept]] | None = None,
) -> None:
    """Every run as measured (gzip JSON): what --replay calibrates and predicts again (``runs``), and the
    runs left out as still disturbed after their tries (``disturbed``, the same fields: never replayed)."""

    def entry(p: Point, k: Kept) -> dict[str, Any]:
        return {
            "point": dataclasses.asdict(p),
            "server": k.result.server,
            "client": k.result.client,
            "background": k.background,
            "round_trip_ns": list(k.round_trip) if k.round_trip else None,
        }

    doc = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "args": vars(a),
        "host": facts,
        "wake_us": wake.wake_us if wake else None,
        "handoff_us": wake.handoff_us if wake else None,
        "load_before": list(load_before),
        "load_after": list(os.getloadavg()),
        "runs": [entry(p, k) for p, rs in results.items() for k in rs],
        "disturbed": [entry(p, k) for p, k in disturbed or ()],
    }
    tmp = f"{path}.tmp"
    with gzip.open(tmp, "wt") as f:
        json.dump(doc, f)
    os.replace(tmp, path)  # never a half-written file, also when the bench is killed while writing


def load_runs(path: str, what: str = "--replay") -> dict[str, Any]:
    """The --runs-out file ``path``; ``what`` names it in the error for a file that is not one."""
    try:
        with gzip.open(path, "rt") as f:
            doc: dict[str, Any] = json.load(f)
    except (OSError, ValueError) as exc:
        raise BenchError(f"{what} {path}: not a --runs-out file ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list):
        raise BenchError(f"{what} {path}: not a --runs-out file (no list of runs)")
    return doc


class Wake(NamedTuple):
    """What the calibrations charge of the host's wake-ups, µs (None: not charged), and how each was found."""

    wake_us: float | None  # ω: the client's CPU to wake a dispatcher asleep in its notifier (r_v)
    handoff_us: float | None  # a released lock's hand-off to a waiter asleep on it (r_h)
    wake_how: str
    handoff_how: str


WAKE_OPTIONS = {"wake_us": "--wake-us", "handoff_us": "--handoff-us"}  # Wake's fields and their options


def host_wake(a: Any, replay_doc: dict[str, Any], sender: int, receiver: int) -> Wake:
    """ω and the lock's hand-off, each: its option (--wake-us, --handoff-us), else a replayed file's, else
    measured by wake-cost from the client's first CPU to the server's (None where it cannot be: the
    calibrations then do not charge it)."""
    found: dict[str, tuple[float | None, str]] = {}
    for field, option in WAKE_OPTIONS.items():
        value = getattr(a, field)
        if value is not None:
            if not value >= 0:
                raise OptionError(f"{option}: must be a number of µs ≥ 0, got {value!r}")
            found[field] = (value, option)
        elif a.replay:
            got = replay_doc.get(field)
            if isinstance(got, int | float) and not isinstance(got, bool):
                found[field] = (float(got), f"measured with the runs, {replay_doc.get('when')}")
            else:
                why = f"{a.replay} holds none (measured before it was recorded): not charged; give {option}"
                found[field] = (None, why)
    if len(found) < len(WAKE_OPTIONS):
        found = {**measured_wake(sender, receiver), **found}
    (wake_us, wake_how), (handoff_us, handoff_how) = found["wake_us"], found["handoff_us"]
    return Wake(wake_us, handoff_us, wake_how, handoff_how)


def measured_wake(sender: int, receiver: int) -> dict[str, tuple[float | None, str]]:
    """Both of :data:`WAKE_OPTIONS` as wake-cost measures them on this host, each with how it was found."""
    if sender == receiver:
        why = "the client and the server share a CPU: not measured, not charged"
    else:
        try:
            cost = measure_wake(
                sender, receiver, runs=5, prog=build_helper("wake_cost", REPO / "build" / "bin")
            )
        except BenchError as exc:
            why = f"not measured ({exc}): not charged"
        except DemuxlabError as exc:
            why = f"not measured ({exc.message}): not charged"
        else:
            how = f"wake-cost from CPU {sender} to CPU {receiver}, median of 5"
            return {"wake_us": (cost.wake_us, how), "handoff_us": (cost.handoff_us, how)}
    return dict.fromkeys(WAKE_OPTIONS, (None, why))


def repeat_spread(runs: dict[Any, list[float]]) -> dict[str, float | int] | None:
    """How far the repeats of one point fall apart on this host: per point with 2 or more runs, the fastest
    over the slowest less 1; their count, median, 90th percentile (nearest rank) and max. A prediction of
    the repeats' mean, however right, is off by up to about half a point's spread; None without repeats."""
    spreads = sorted(max(v) / min(v) - 1.0 for v in runs.values() if len(v) >= 2 and min(v) > 0)
    if not spreads:
        return None
    n = len(spreads)
    return {
        "points": n,
        "median": spreads[(n - 1) // 2],
        "p90": spreads[int(0.9 * (n - 1))],
        "max": spreads[-1],
    }


def sleeps_per_message(runs: list[Kept]) -> float | None:
    """The client's sleeps per message over ``runs`` (its report's ``sleeps``), or None where a client
    did not count them."""
    sleeps = [k.result.client.get("sleeps") for k in runs]
    if not runs or not all(isinstance(n, int) and not isinstance(n, bool) for n in sleeps):
        return None
    return sum(sleeps) / max(sum(int(k.result.client["messages"]) for k in runs), 1)  # type: ignore[arg-type]


def print_sleeps(
    keys: list[Point],
    client: dict[Point, float | None],
    chain: dict[Point, float],
    model: dict[tuple[Point, str], float],
    measured: dict[Point, float],
) -> None:
    """The chain's client sleeps per message against the client's, at the points that count them: where
    the send's wake-ups (and so the throughput) come out wrong, these differ (docs/ctmc-reference.md, "The
    send that wakes the client")."""
    rows = []
    for p in keys:
        got, real = chain.get(p), client[p]
        if got is None or real is None:
            continue
        err = (model[(p, "calibrated")] - measured[p]) / measured[p]
        ratio = f"{got / real:.2f}" if real > 0 else "-"
        rows.append(
            [p.pattern, p.notifier, p.threads, f"{p.work_us:g}", p.connections, p.msg_size,
             f"{real:.3f}", f"{got:.3f}", ratio, f"{err * 100:+.1f}%"]
        )  # fmt: skip
    print()
    if not rows:
        print("# --sleeps: no calibrated point has the client's sleeps fitted (r_u)")
        return
    print("the client's sleeps per message, the client's count against the chain's (r_u fitted):")
    print_table(
        ["pattern", "notifier", "threads", "work µs", "conns", "size", "client", "chain", "chain/client",
         "calib err"],
        rows,
    )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    ap = load_parser(__doc__, duration=5.0)
    ap.add_argument("--spec", action="append", default=[], help="an experiment spec (repeatable)")
    ap.add_argument(
        "--patterns",
        type=PATTERN_LIST,
        default=None,
        help="without --spec: the patterns (comma list; hsha,lf)",
    )
    ap.add_argument(
        "--only", type=PATTERN_LIST, default=None, help="with --spec: only these patterns (comma list)"
    )
    ap.add_argument(
        "--patterns-of-smoke",
        type=PATTERN_LIST,
        default=None,
        help="patterns of the spec named smoke (comma list)",
    )
    ap.add_argument("--notifier", choices=NOTIFIERS, default=None, help="without --spec (epoll-lt)")
    ap.add_argument(
        "--work",
        type=WORK_LIST,
        default=None,
        help="without --spec: work per message, µs (comma list; 10,20,50)",
    )
    ap.add_argument(
        "--threads", type=THREAD_LIST, default=None, help="total threads, e.g. 1-4 (with --spec: a filter)"
    )
    ap.add_argument("--connections", type=positive_int, default=None, help="without --spec (512)")
    ap.add_argument(
        "--client-threads",
        type=int,
        default=None,
        help="the client's threads (with --spec: instead of each spec's; without: default one per CPU)",
    )
    ap.add_argument(
        "--repeats", type=positive_int, default=None, help="measured runs per point (default: the spec's)"
    )
    ap.add_argument("--calib-repeats", type=positive_int, default=1)
    ap.add_argument("--spec-phases", action="store_true", help="use the specs' warm-up and measure times")
    ap.add_argument(
        "--max-background",
        type=float,
        default=None,
        help="rerun a run during which other processes used more than this share of the CPUs, and leave "
        "it out if it still did after --retries tries (with --replay: the file's, unless given)",
    )
    ap.add_argument(
        "--max-round-trip",
        type=positive_float,
        default=None,
        help="rerun a run when a cache line's round trip between the server's and the client's first CPU, "
        "measured before and after it, exceeded this many ns (a VM whose CPUs the hypervisor placed far "
        "apart for a while: docs/ctmc-reference.md)",
    )
    ap.add_argument(
        "--retries",
        type=positive_int,
        default=3,
        help="with --max-background or --max-round-trip: runs per point at most",
    )
    ap.add_argument(
        "--quiet-wait",
        type=nonnegative_float,
        default=30.0,
        help="with --max-background or --max-round-trip: seconds to wait for a quiet host, or a near CPU",
    )
    ap.add_argument("--seed", type=int, default=19, help="the run order's seed")
    ap.add_argument("--method", default="ssa", choices=["ssa", "fluid", "exact"])
    ap.add_argument("--rel-ci", type=positive_float, default=0.01, help="SSA target relative CI")
    ap.add_argument("--jobs", type=nonnegative_int, default=0, help="prediction processes (0: one per CPU)")
    ap.add_argument("--json", dest="json_out", help="write every figure here as JSON")
    ap.add_argument(
        "--sleeps",
        action="store_true",
        help="also count, at every point whose calibration fitted the client's sleeps (r_u: every "
        "design but uring, uring-shared), how often the chain's client sleeps per message against the "
        "client's own count (SSA)",
    )
    ap.add_argument(
        "--wake-us",
        type=float,
        default=None,
        help="ω, µs: what a request costs the client more when it wakes a dispatcher asleep in its "
        "notifier (HSHA, proactor; docs/ctmc-reference.md); default: measured by build/bin/wake-cost "
        "before the runs (with --replay: the file's); 0: not charged",
    )
    ap.add_argument(
        "--handoff-us",
        type=float,
        default=None,
        help="µs from a lock's release to its waiter, asleep on it on another core, holding it "
        "(uring-shared's submission lock; docs/ctmc-reference.md); default: measured by "
        "build/bin/wake-cost before the runs (with --replay: the file's); 0: not charged",
    )
    ap.add_argument(
        "--probe",
        action="store_true",
        help="also one instrumented run of every measured point beyond the calibration concurrency (its "
        "operations and scheduling, for --runs-out; not calibrated from, not predicted)",
    )
    ap.add_argument("--runs-out", help="write every run (point, server and client JSON, background) here")
    ap.add_argument(
        "--time-limit",
        type=nonnegative_float,
        default=None,
        help="seconds of measuring after which no run starts (the runs are ordered in rounds of one run of "
        "every point, so a cut drops later repeats first); with --runs-out, the file holds what was run",
    )
    ap.add_argument(
        "--measure-only",
        action="store_true",
        help="with --runs-out: stop after measuring (calibrate and predict later with --replay, e.g. on "
        "another host: a lent machine's time goes to the runs alone)",
    )
    ap.add_argument(
        "--keep-going",
        action="store_true",
        help="a run that fails is reported and left out, and the others go on (default: the first stops all)",
    )
    ap.add_argument(
        "--replay",
        help="calibrate and predict the runs a --runs-out file holds instead of measuring (a model change "
        "against the same measurements)",
    )
    ap.add_argument(
        "--calibrate-from",
        help="calibrate from the calibration runs (and the plain runs of their points) of this --runs-out "
        "file, recorded at another time, and predict the measured or --replay'ed points with them: the "
        "generalisation test (issue 43; the points' own calibration runs are fitted too, the 'same day' "
        "column, for comparison only)",
    )
    ap.add_argument(
        "--ablate",
        type=ABLATION_LIST,
        default=None,
        help="also the calibrated error with each of these parts of a calibration left out in turn (a comma "
        "list of demuxlab.ctmc.calibrate.ABLATIONS: pace, speed, calls, r_n, r_x, r_z, r_v, r_u, r_k, r_w, "
        "r_h, r_l, r_p, r_g, r_i, r_o, r_a, r_e)",
    )
    ap.add_argument(
        "--at-run-share",
        action="store_true",
        help="also each point's calibrated prediction at the share of its CPUs its own runs had (server and "
        "client, from their wait_s): not a prediction, the part of an error that is the host's load moving",
    )
    ap.add_argument(
        "--no-plain",
        action="store_true",
        help="calibrate from the instrumented runs alone (speed and self-check from them: before issue 43)",
    )
    a = ap.parse_args(argv)
    if a.spec and not a.replay:  # a manual grid's option with a spec would be silently ignored
        for name in MANUAL_DEFAULTS.keys() - {"threads"}:
            if getattr(a, name) is not None:
                ap.error(f"--{name}: sets the manual grid, not a spec's points (with --spec: --only)")
    if a.client_threads is not None and a.client_threads < 1:
        ap.error(f"--client-threads: must be at least 1, got {a.client_threads}")
    if a.measure_only and (not a.runs_out or a.replay):
        ap.error("--measure-only needs --runs-out (where the runs go for a later --replay), not --replay")
    if a.max_background is not None and not 0.0 <= a.max_background <= 1.0:
        ap.error(f"--max-background: must be a share of the CPUs in [0, 1], got {a.max_background!r}")
    if a.sleeps and a.method != "ssa":
        ap.error(f"--sleeps: the chain's sleeps are counted by the SSA, not --method {a.method}")
    replay_doc: dict[str, Any] = {}
    if a.replay:
        replay_doc = load_runs(a.replay)
        for name in POINT_ARGS:  # the points are the measured ones
            setattr(a, name, replay_doc["args"][name])
        if a.max_background is None:
            a.max_background = replay_doc["args"].get("max_background")

    threads_filter = set(int_list(a.threads)) if a.threads else None
    points: list[Point] = []
    phases: dict[str, dict[str, Any]] = {}
    for path in a.spec:
        only: set[str] | None = set(a.only.split(",")) if a.only else None
        if a.patterns_of_smoke and Path(path).stem == "smoke":
            only = set(a.patterns_of_smoke.split(","))
        pts, ph = spec_points(path, threads_filter, only, a.client_threads)
        points += pts
        phases[pts[0].spec if pts else path] = ph
    if not a.spec:
        for name, default in MANUAL_DEFAULTS.items():
            if getattr(a, name) is None:
                setattr(a, name, default)
        points = manual_points(a)
    if not points:
        raise BenchError("no points: check --spec, --only and --threads")

    facts = replay_doc["host"] if a.replay else collect_facts()
    biggest = max(p.threads for p in points)
    spec_clients = max((p.client_threads for p in points), default=0)
    plan = plan_pinning(facts, facts, biggest, max(spec_clients, 1), True)
    server_cpus, client_cpus = plan.server_cpus, plan.client_cpus
    host = (
        f"{facts.get('hostname')}: {facts.get('cpu_model')}, {facts.get('cores')} cores, "
        f"{len(facts.get('numa_nodes') or [])} NUMA node(s), kernel {facts.get('kernel')}"
    )
    load_before = tuple(replay_doc["load_before"]) if a.replay else os.getloadavg()
    print(f"# host {host}", flush=True)
    print(
        f"# load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}", flush=True
    )
    print(f"# server CPUs {cpu_list(server_cpus)}, client CPUs {cpu_list(client_cpus)}", flush=True)
    wake = host_wake(a, replay_doc, client_cpus[0], server_cpus[0])
    wake_us = wake.wake_us
    omega = f"{wake_us:.2f} µs" if wake_us is not None else "-"
    print(f"# the client's wake-up of a sleeping dispatcher (ω): {omega} ({wake.wake_how})", flush=True)
    handoff = f"{wake.handoff_us:.2f} µs" if wake.handoff_us is not None else "-"
    print(f"# a released lock's hand-off to a sleeping waiter: {handoff} ({wake.handoff_how})", flush=True)

    if a.probe:
        points += [
            dataclasses.replace(p, instrument=True)
            for p in points
            if not p.instrument and p.threads != calibration_threads(p.pattern)
        ]
    rng = random.Random(a.seed)
    rounds: dict[int, list[tuple[Point, int]]] = defaultdict(list)
    for p in points:
        ph = phases.get(p.spec, {})
        reps = (
            (a.calib_repeats if p.calibrates else 1)
            if p.instrument
            else (a.repeats or ph.get("repeats") or 1)
        )
        for i in range(reps):
            rounds[i].append((p, i))
    # Round i holds the i-th run of every point, in a random order: each round sees every point once (a
    # host's drift spreads over all of them), and a --time-limit cut drops the last repeats first.
    jobs: list[tuple[Point, int]] = []
    for i in sorted(rounds):
        rng.shuffle(rounds[i])
        jobs += rounds[i]

    def timing(p: Point) -> tuple[float, float]:
        ph = phases.get(p.spec, {})
        if a.spec_phases and ph:
            return float(ph["warmup"]), float(ph["duration"])
        return a.warmup, a.duration

    results: dict[Point, list[Kept]] = defaultdict(list)
    disturbed: list[tuple[Point, Kept]] = []  # runs still over --max-background after their tries
    t0 = time.monotonic()
    if a.replay:
        jobs = []
        results, disturbed = load_results(replay_doc, a.max_background)
        print(
            f"# replay of {a.replay}: {len(replay_doc['runs'])} runs measured {replay_doc['when']}",
            flush=True,
        )
    crossing: RoundTrip | None = None
    if jobs:
        try:
            crossing = RoundTrip(build_helper("cpu_pingpong"), (server_cpus[0], client_cpus[0]))
            crossing.measure(1_000)
        except (BenchError, OSError) as exc:
            if a.max_round_trip is not None:
                raise BenchError(f"--max-round-trip: the round trip cannot be measured: {exc}") from None
            print(f"# the cross-CPU round trip is not measured: {exc}", flush=True)
            crossing = None
    gated = a.max_background is not None or a.max_round_trip is not None
    far_runs = 0  # attempts whose round trip exceeded --max-round-trip
    failed: list[tuple[Point, str]] = []
    keep = a.runs_out and not a.replay
    if keep:  # before the runs, then after each: a bench stopped part way keeps what it measured
        save_runs(a.runs_out, a, facts, load_before, results, wake, disturbed)
    for n, (p, _rep) in enumerate(jobs, 1):
        if a.time_limit is not None and time.monotonic() - t0 > a.time_limit:
            print(
                f"# --time-limit {a.time_limit:g} s: {len(jobs) - n + 1} of {len(jobs)} runs not run",
                flush=True,
            )
            break
        warm, dur = timing(p)
        ct = p.client_threads or len(client_cpus)
        best: Kept | None = None
        for _attempt in range(a.retries if gated else 1):
            if a.max_background is not None:
                wait_for_quiet(a.max_background, a.quiet_wait)
            if crossing is not None and a.max_round_trip is not None:
                crossing.wait_below(a.max_round_trip, a.quiet_wait)
            rt_before = crossing.measure() if crossing is not None else None
            cmd = Server(
                p.pattern,
                p.notifier,
                p.threads,
                cpus=cpu_list(server_cpus),
                instrument=p.instrument,
                work_us=p.work_us,
            )
            before, start = CpuTimes(), time.monotonic()
            try:
                r = run_pair(cmd, connections=p.connections, warmup=warm, duration=dur, client_threads=ct,
                             msg_size=p.msg_size, client_cpu=cpu_list(client_cpus))  # fmt: skip
            except BenchError as exc:
                if not a.keep_going:
                    raise
                if best is None:  # a retry that fails keeps the earlier attempt
                    failed.append((p, str(exc)))
                    print(f"# [{n}/{len(jobs)}] {p.label()}: failed: {exc}", flush=True)
                break
            wall = time.monotonic() - start
            cli = r.client["cpu_s"]
            ours = (
                r.server["cpu_s"]["user"] + r.server["cpu_s"]["sys"] + (cli["user"] + cli["sys"]) * wall / dur
            )
            bg = background_share(before, CpuTimes(), wall, ours)
            rt = (rt_before, crossing.measure()) if crossing is not None and rt_before is not None else None
            got = Kept(r, bg, rt)
            far = got.far(a.max_round_trip)
            # Keep a run with near CPUs over one without, then the least disturbed.
            if best is None or (far, bg) < (best.far(a.max_round_trip), best.background):
                best = got
            if (a.max_background is None or bg <= a.max_background) and not far:
                break
            far_runs += far
        if best is None:
            continue
        over = a.max_background is not None and best.background > a.max_background
        if over:
            disturbed.append((p, best))
        else:
            results[p].append(best)
        trip = f", round trip {best.round_trip[0]:.0f}/{best.round_trip[1]:.0f} ns" if best.round_trip else ""
        out = (
            f": over --max-background {a.max_background:.0%} after {a.retries} tries: left out"
            if over
            else ""
        )
        print(
            f"# [{n}/{len(jobs)}] {p.label()}: {best.result.throughput:,.0f} msg/s, "
            f"background {best.background:.0%}{trip}{out}",
            flush=True,
        )
        if keep:
            save_runs(a.runs_out, a, facts, load_before, results, wake, disturbed)
    measure_s = time.monotonic() - t0
    for p, why in failed:
        print(f"# failed: {p.label()}: {why}", flush=True)
    for p, k in disturbed:
        print(
            f"# left out: {p.label()}: {k.result.throughput:,.0f} msg/s, other processes took "
            f"{k.background:.0%} of the CPUs (over --max-background {a.max_background:.0%})",
            flush=True,
        )
    if disturbed and not any(results.values()):
        raise BenchError(
            f"every run was left out: other processes took more than --max-background {a.max_background:.0%} "
            "of the CPUs during each"
        )
    if a.measure_only:
        print(
            f"# measured {sum(map(len, results.values()))} runs in {measure_s:.0f} s: {a.runs_out}",
            flush=True,
        )
        return

    report(a, results, disturbed, facts, host, (server_cpus, client_cpus), wake, load_before, replay_doc,
           measure_s, far_runs)  # fmt: skip


def load_results(
    doc: dict[str, Any], max_background: float | None
) -> tuple[dict[Point, list[Kept]], list[tuple[Point, Kept]]]:
    """A --runs-out file's runs by point, and those over ``max_background`` (left out)."""
    results: dict[Point, list[Kept]] = defaultdict(list)
    disturbed: list[tuple[Point, Kept]] = []
    for run in doc["runs"]:
        rt = run.get("round_trip_ns")
        p = Point(**run["point"])
        k = Kept(Result(run["server"], run["client"]), run["background"], tuple(rt) if rt else None)
        if max_background is not None and k.background > max_background:
            disturbed.append((p, k))  # an older bench kept it
        else:
            results[p].append(k)
    return results, disturbed


def report(
    a: Any,
    results: dict[Point, list[Kept]],
    disturbed: list[tuple[Point, Kept]],
    facts: dict[str, Any],
    host: str,
    cpus: tuple[tuple[int, ...], tuple[int, ...]],
    wake: Wake,
    load_before: tuple[float, ...],
    replay_doc: dict[str, Any],
    measure_s: float,
    far_runs: int,
) -> None:
    """Calibrate (from these runs, or from --calibrate-from's), predict every measured point, and print the
    tables; --json writes every figure."""
    server_cpus, client_cpus = cpus
    cross = a.calibrate_from is not None
    own_inputs = calibration_inputs(results, cross)
    client_cores = len(client_cpus)
    cal_wake: tuple[float | None, float | None] = (wake.wake_us, wake.handoff_us)
    cal_doc: dict[str, Any] = {}
    if cross:
        cal_doc = load_runs(a.calibrate_from, "--calibrate-from")
        cal_inputs = calibration_inputs(load_results(cal_doc, a.max_background)[0], cross)
        if not cal_inputs:
            raise BenchError(f"--calibrate-from {a.calibrate_from}: holds no calibration runs")
        cal_wake = (
            a.wake_us if a.wake_us is not None else cal_doc.get("wake_us"),
            a.handoff_us if a.handoff_us is not None else cal_doc.get("handoff_us"),
        )
    else:
        cal_inputs = own_inputs
    use_plain = not a.no_plain
    t1 = time.monotonic()
    fits = fit_all(cal_inputs, *cal_wake, client_cores, use_plain=use_plain)
    sources = {
        "paper": Source(),
        "calibrated": Source(fits, cross, {k: v.works for k, v in cal_inputs.items()}),
    }
    if a.at_run_share:
        works = {k: v.works for k, v in cal_inputs.items()}
        sources["at run share"] = Source(fits, cross, works, at_run_share(results, client_cores))
    same_day: dict[CalKey, Fitted] = {}
    if cross and own_inputs:
        same_day = fit_all(own_inputs, wake.wake_us, wake.handoff_us, client_cores, use_plain=use_plain)
        sources["same day"] = Source(same_day, cross, {k: v.works for k, v in own_inputs.items()})
    measured = {
        p: statistics.mean(k.result.throughput for k in rs)
        for p, rs in results.items()
        if not p.instrument and rs
    }
    keys = sorted(
        measured,
        key=lambda p: (p.spec, p.pattern, p.notifier, p.connections, p.msg_size, p.work_us, p.threads),
    )
    plain = {p: [k.result.throughput for k in results[p]] for p in keys}
    predict = functools.partial(
        predictions, method=a.method, rel_ci=a.rel_ci, jobs=a.jobs, server_cores=len(server_cpus),
        client_cores=client_cores, client_threads=len(client_cpus),
    )  # fmt: skip
    model, chain_sleeps, uncalibrated = predict(keys, sources, sleeps=a.sleeps)
    predict_s = time.monotonic() - t1
    load_after = tuple(replay_doc["load_after"]) if a.replay else os.getloadavg()
    names = list(sources)
    rows = []
    for p in keys:
        m = measured[p]
        bg = statistics.mean(k.background for k in results[p])
        apart = max(plain[p]) / min(plain[p]) - 1.0 if len(plain[p]) > 1 and min(plain[p]) > 0 else None
        row: list[object] = [
            p.spec, p.pattern, p.notifier, p.threads, f"{p.work_us:g}", p.connections, p.msg_size, m,
            f"{apart:.0%}" if apart is not None else "-", f"{bg:.0%}",
        ]  # fmt: skip
        for name in names:
            pred = model.get((p, name))
            row += ["-", "-"] if pred is None else [pred, f"{(pred - m) / m * 100:+.1f}%"]
        rows.append(row)
    print()
    omega = f"{cal_wake[0]:.2f} µs" if cal_wake[0] is not None else "-"
    handoff = f"{cal_wake[1]:.2f} µs" if cal_wake[1] is not None else "-"
    print(
        f"method {a.method}; host {host}; server CPUs {cpu_list(server_cpus)}, "
        f"client CPUs {cpu_list(client_cpus)}; ω {omega} ({wake.wake_how}); hand-off {handoff} "
        f"({wake.handoff_how})"
        + (f"; calibrated from {a.calibrate_from} (measured {cal_doc.get('when')}, load average before "
           f"{cal_doc.get('load_before', [float('nan')])[0]:.2f})" if cross else "")
    )  # fmt: skip
    heads = ["spec", "pattern", "notifier", "threads", "work µs", "conns", "size", "measured", "spread", "bg"]
    for name in names:
        heads += [name, f"{name} err" if name != "calibrated" else "calib err"]
    print_table(heads, rows)
    for title, got, inputs in (
        ("calibrations" + (f" (from {a.calibrate_from})" if cross else ""), fits, cal_inputs),
        ("the same day's own calibrations (for comparison: not the held-out figure)", same_day, own_inputs),
    ):
        if got:
            _print_cuts(got, uncalibrated if got is fits else {})
            print_status(got, title + ":")
            del inputs
    per = {name: errors(keys, measured, model, name) for name in names}
    print()
    print_table(["rates", "pattern", "notifier", "points", "mean |error|", "max |error|"], summary_rows(per))
    client_sleeps = {p: sleeps_per_message(results[p]) for p in keys}
    if a.sleeps:
        print_sleeps(keys, client_sleeps, chain_sleeps, model, measured)
    cal = overall(per["calibrated"])
    target = TARGETS["16-core" if (facts.get("cores") or 0) >= 16 else "2-core"]
    if cross:
        target = TARGETS["held-out"]
        away = [p for p in keys if not _at_calibration(p, cal_inputs)]
        beyond = overall(errors(away, measured, model, "calibrated"))
        if beyond:
            print(
                f"held out, without the settings the calibration set also ran (its concurrency at its work "
                f"values): mean |error| {beyond[0]:.1%}, max {beyond[1]:.1%} over {beyond[2]} points"
            )
    if cal:
        ok = cal[0] <= target[0] and cal[1] <= target[1]
        print(
            f"calibrated: mean |error| {cal[0]:.1%}, max {cal[1]:.1%} "
            f"(target ≤ {target[0]:.0%} / ≤ {target[1]:.0%} on this host): {'met' if ok else 'NOT met'}"
        )
    spread = repeat_spread(plain)
    if spread:
        print(
            f"the repeats of one point differ by (fastest / slowest − 1, {spread['points']} points): median "
            f"{spread['median']:.1%}, 90th percentile {spread['p90']:.1%}, max {spread['max']:.1%} "
            "(the host's run-to-run noise, which no model removes)"
        )
    trips = sorted(t for rs in results.values() for k in rs if k.round_trip for t in k.round_trip)
    if trips:
        gate = ""
        if a.max_round_trip is not None:
            over = sum(k.far(a.max_round_trip) for rs in results.values() for k in rs)
            gate = f"; {far_runs} attempt(s) over --max-round-trip {a.max_round_trip:g} ns, {over} kept"
        mid = trips[(len(trips) - 1) // 2]
        print(
            f"the cross-CPU round trip (a cache line between CPU {cpu_list(server_cpus[:1])} and CPU "
            f"{cpu_list(client_cpus[:1])}, before and after each run): median {mid:.0f} ns, "
            f"min {trips[0]:.0f}, max {trips[-1]:.0f}{gate}"
        )
    bgs = [k.background for rs in results.values() for k in rs]
    print(
        f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} (1 min); other processes' "
        f"share of the CPUs during the runs kept: mean {statistics.mean(bgs):.0%}, max {max(bgs):.0%}"
        + (f"; {len(disturbed)} run(s) left out, still over --max-background" if disturbed else "")
    )
    measured_how = (
        f"replayed the runs measured {replay_doc['when']}" if a.replay else f"measured in {measure_s:.0f} s"
    )
    print(f"{measured_how}, calibrated and predicted in {predict_s:.0f} s")
    ablation: list[Ablation] = []
    if a.ablate:

        def refit(part: str, only: Any) -> dict[CalKey, Fitted]:
            return fit_all(cal_inputs, *cal_wake, client_cores, off={part}, only=only, use_plain=use_plain)

        def repredict(again: Any, only: Any) -> dict[tuple[Any, str], float]:
            pts = [p for p in keys if cal_key(p, cross) in only]
            works = {k: v.works for k, v in cal_inputs.items()}
            return predict(pts, {"calibrated": Source(again, cross, works)})[0]

        ablation = ablate(
            a.ablate.split(","), fits, refit, repredict, model, "calibrated",
            lambda got: overall(errors(keys, measured, got, "calibrated")),
        )  # fmt: skip
        print_ablation(ablation, cal, "held out" if cross else "the runs' own points")
    if a.json_out:
        _write_json(a, facts, cpus, cal_wake, load_before, load_after, spread, fits, same_day, keys, measured,
                    results, model, client_sleeps, chain_sleeps, names, ablation, cal)  # fmt: skip


def _at_calibration(p: Point, inputs: dict[CalKey, Any]) -> bool:
    """Whether ``p`` is at a setting the calibration set ran too: its concurrency at one of its works."""
    key = cal_key(p, True)
    return p.threads == calibration_threads(p.pattern) and any(
        (k[1], k[2], k[3], k[4]) == key[1:] and p.work_us in v.works for k, v in inputs.items()
    )


def _print_cuts(fits: dict[CalKey, Fitted], uncalibrated: dict[CalKey, set[float]]) -> None:
    for key in sorted(fits):
        if uncalibrated.get(key):
            cut = ", ".join(f"{w:g}" for w in sorted(uncalibrated[key]))
            spec = f" ({key[0]})" if key[0] else ""  # the spec it was fitted on ("": --calibrate-from's runs)
            print(
                f"# calibration {key[1]}/{key[2]} c{key[3]} b{key[4]}{spec}: has no run at {cut} µs work or "
                "less (cut short): its points there are not predicted from it"
            )


def _write_json(
    a: Any,
    facts: dict[str, Any],
    cpus: tuple[tuple[int, ...], tuple[int, ...]],
    cal_wake: tuple[float | None, float | None],
    load_before: tuple[float, ...],
    load_after: tuple[float, ...],
    spread: dict[str, float | int] | None,
    fits: dict[CalKey, Fitted],
    same_day: dict[CalKey, Fitted],
    keys: list[Point],
    measured: dict[Point, float],
    results: dict[Point, list[Kept]],
    model: dict[tuple[Any, str], float],
    client_sleeps: dict[Point, float | None],
    chain_sleeps: dict[Any, float],
    names: list[str],
    ablation: list[Ablation],
    cal: tuple[float, float, int] | None,
) -> None:
    fields = ("spec", "pattern", "notifier", "threads", "work_us", "connections", "msg_size")
    doc = {
        "host": facts,
        "server_cpus": list(cpus[0]),
        "client_cpus": list(cpus[1]),
        "wake_us": cal_wake[0],
        "handoff_us": cal_wake[1],
        "args": vars(a),
        "load_before": load_before,
        "load_after": load_after,
        "repeat_spread": spread,
        "calibrations": [f.as_row(k) for k, f in sorted(fits.items())],
        "same_day_calibrations": [f.as_row(k) for k, f in sorted(same_day.items())],
        "calibrated_error": {"mean": cal[0], "max": cal[1], "points": cal[2]} if cal else None,
        "ablation": [dataclasses.asdict(r) for r in ablation],
        "points": [
            {
                **{f: getattr(p, f) for f in fields},
                "measured": measured[p],
                "runs": [k.result.throughput for k in results[p]],
                "background": [k.background for k in results[p]],
                "round_trip_ns": [list(k.round_trip) if k.round_trip else None for k in results[p]],
                **{name.replace(" ", "_"): model.get((p, name)) for name in names},
                "client_sleeps_per_message": client_sleeps[p],
                "chain_sleeps_per_message": chain_sleeps.get(p),
            }
            for p in keys
        ],
    }
    Path(a.json_out).write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    entry(main)  # the project's own errors (pinning, rates, specs) are one line too
