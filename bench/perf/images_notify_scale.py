"""Benchmark 5: notifier scaling as in seed 004: time of one notifier call against the number of watched
descriptors, with only a few ready.

Runs images/bench/notify_scale.c (built into build/bench/notify-scale), which links demux-server's own
notifier back-ends: N eventfds, A of them readable; one call is the server's round of the back-end, a
non-blocking wait and a re-arm of each reported descriptor. select stops at FD_SETSIZE (1024).

    .venv/bin/python -m bench images_notify_scale [--fds 100 300 1000 3000 10000] [--active 4]
        [--budget-s 0.2]
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence

from bench.common.cli import BenchError, entry, parser, positive_float, positive_int, print_table
from bench.common.pairs import build_helper, cpus_available

NOTIFIERS = ["select", "poll", "epoll-lt", "epoll-et", "uring"]


def main(argv: Sequence[str] | None = None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--fds", type=positive_int, nargs="+", default=[100, 300, 1000, 3000, 10000])
    ap.add_argument("--active", type=positive_int, default=4)
    ap.add_argument("--budget-s", type=positive_float, default=0.2, help="approximate time per measurement")
    a = ap.parse_args(argv)
    prog = build_helper("notify_scale")
    cpu = cpus_available()[-1]
    table: dict[int, dict[str, float | None]] = {}
    for n in a.fds:
        table[n] = {}
        for notifier in NOTIFIERS:
            if notifier == "select" and n + 16 > 1024:
                table[n][notifier] = None
                continue
            # Calibrate on a short run, then size the real one to the budget.
            iters = 200
            for _ in range(2):
                res = subprocess.run(
                    [str(prog), "--notifier", notifier, "--fds", str(n), "--active", str(a.active),
                     "--iters", str(iters), "--cpu", str(cpu)],
                    capture_output=True, text=True, timeout=120,
                )  # fmt: skip
                if res.returncode != 0:
                    raise BenchError(f"notify-scale {notifier} {n}: {res.stderr.strip()}")
                out = json.loads(res.stdout)
                if abs(out["ready_per_call"] - a.active) > 1e-9:
                    raise BenchError(f"{notifier} at {n} fds returned {out['ready_per_call']} ready per call")
                iters = max(200, min(1_000_000, int(a.budget_s / (out["us_per_call"] * 1e-6))))
            table[n][notifier] = out["us_per_call"]
        print(f"# {n} fds done", flush=True)
    rows = [[n, *("n/a" if table[n][k] is None else table[n][k] for k in NOTIFIERS)] for n in a.fds]
    print()
    print(f"µs per notifier call, {a.active} ready descriptors, pinned to CPU {cpu}")
    print_table(["fds", *NOTIFIERS], rows)
    first, last = a.fds[0], a.fds[-1]
    print()
    for k in NOTIFIERS:
        lo, hi = table[first][k], table[last][k]
        if lo is not None and hi is not None:
            print(f"{k}: x{hi / lo:.1f} from {first} to {last} fds")


if __name__ == "__main__":
    entry(main)
