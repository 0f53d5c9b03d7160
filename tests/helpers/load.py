"""Verdicts on timing that do not depend on how busy the host is.

A test that bounds a duration ("the server stops at once", "an unreachable host fails the attempt at
once", "a wake-up takes under 100 µs") states the bound for a quiet host. On a busy one (another build,
the suite's other xdist workers) the same code takes longer for want of a CPU, and a bare
``assert elapsed < bound`` would judge the host, not the code.

``Span`` times a block and measures, over the same interval, how long tasks on this host were kept waiting:
Linux's pressure stall information (``/proc/pressure/cpu`` and ``io``, their ``some`` totals: the time
during which at least one runnable task waited for a CPU or for I/O). Contention can delay a task, or a
chain of them, by at most that stall time, so a claim about timing is settled by ``settle(span, claim...)``:

- a claim that holds passes;
- a claim that does not hold fails when the host's stall is shorter than the lateness it would have to
  explain (a real delay: the code, not the host);
- otherwise the test is skipped, naming the figures (the host was too busy to judge).

``within(span, bound_s, what)`` is the common claim: the block took under ``bound_s``; ``under(what, value,
bound)`` states another (a duration the code measured: a record's ``orchestration_s``, a latency in ns).
Settle at the end of the test, after every other assertion, so a skip never hides one. Without
``/proc/pressure`` the 1-minute load average stands in: at or above the CPU count, a late claim is a skip.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

PRESSURE = Path("/proc/pressure")


def stall_us(pressure: Path = PRESSURE) -> int | None:
    """Microseconds since boot during which some task waited for a CPU or for I/O; None without PSI."""
    total = 0
    try:
        for resource in ("cpu", "io"):
            some = (pressure / resource).read_text().splitlines()[0]  # "some avg10=… avg300=… total=N"
            total += int(some.rsplit("total=", 1)[1])
    except (OSError, IndexError, ValueError):
        return None
    return total


@dataclass
class Span:
    """``with Span() as span: ...``: the block's wall time and the host's stall time over it, in seconds,
    and the 1-minute load average at its end."""

    wall_s: float = 0.0
    stall_s: float | None = None
    load1: float = 0.0

    def __enter__(self) -> Span:
        self._stall0 = stall_us()
        self._t0 = time.monotonic()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.wall_s = time.monotonic() - self._t0
        stall1 = stall_us()
        self.stall_s = None if self._stall0 is None or stall1 is None else (stall1 - self._stall0) / 1e6
        self.load1 = os.getloadavg()[0]


@dataclass(frozen=True)
class Claim:
    """A statement about timing: ``holds``, else it is ``late_s`` seconds late (what contention would have
    to explain); ``what`` says it in words for the failure or the skip."""

    holds: bool
    what: str
    late_s: float


def busy_reason(span: Span, late_s: float) -> str | None:
    """Why the host's contention over ``span`` could make something ``late_s`` late; None: it cannot."""
    cpus = os.cpu_count() or 1
    if span.stall_s is not None:
        if span.stall_s >= late_s:
            return (
                f"tasks on this host waited {span.stall_s:.2f} s for a CPU or I/O meanwhile "
                f"(/proc/pressure; load average {span.load1:.1f} on {cpus} CPUs)"
            )
        return None
    if span.load1 >= cpus:
        return (
            f"the load average was {span.load1:.1f} on {cpus} CPUs (no /proc/pressure to measure the stall)"
        )
    return None


def settle(span: Span, *claims: Claim) -> None:
    """Every claim holds: pass. One does not and the host cannot explain it: fail. Else: skip, saying why."""
    late = [c for c in claims if not c.holds]
    unexplained = [c for c in late if busy_reason(span, c.late_s) is None]
    if unexplained:
        stall = "unmeasured" if span.stall_s is None else f"{span.stall_s:.2f} s"
        raise AssertionError(
            "; ".join(f"{c.what} ({c.late_s:.3g} s late)" for c in unexplained)
            + f"; the host's stall over the {span.wall_s:.1f} s ({stall}) does not explain it"
        )
    if late:
        reason = busy_reason(span, max(c.late_s for c in late))
        pytest.skip(
            "; ".join(c.what for c in late) + f": a quiet host's bound, and {reason}: too busy a host to "
            "judge (every other assertion of the test passed)"
        )


def under(what: str, value: float, bound: float, *, unit_s: float = 1.0) -> Claim:
    """The claim "``value`` is under ``bound``", both in units of ``unit_s`` seconds (1e-9: nanoseconds);
    ``what`` names the value (with its unit) in the failure or the skip."""
    return Claim(value < bound, f"{what} {value:g}, not under {bound:g}", (value - bound) * unit_s)


def within(span: Span, bound_s: float, what: str) -> None:
    """Settles "``span`` took under ``bound_s``" (a quiet host's bound). Call it last in the test."""
    settle(span, under(f"{what} took (s)", round(span.wall_s, 3), bound_s))


def measured_wake(pinnings: Sequence[Mapping[str, Any]]) -> Claim:
    """The claim "the client's wake-up (ω, ``pinning.wake_us``) was measured for one of these runs"
    (demuxlab.launch.wake). wake-cost's 3 runs of 2,000 sends take about a second on a quiet host and can
    run past their time limit on a busy one: a run's note then says "timed out after N seconds", about N s
    late. Any other reason it was not measured is never the host's (infinitely late: a failure)."""
    if any("wake_us" in p for p in pinnings):
        return Claim(True, "ω measured", 0.0)
    notes = [n for p in pinnings for n in p.get("notes", ()) if "wake-up cost was not measured" in n]
    limits = [
        float(m.group(1)) for n in notes for m in [re.search(r"timed out after ([0-9.]+) seconds", n)] if m
    ]
    late = max(limits) - 1.0 if limits and len(limits) == len(notes) else math.inf
    return Claim(False, f"no run has ω measured: {notes or 'and no note says why'}", late)
