"""Which pair a run goes to: a free, healthy pair of the run's hardware class, taken under its lease.

The workflow chains each experiment's runs in as many lanes as there are pairs (the spec's randomized
order, kept as far as the number of pairs allows), so at most one run per pair is in flight; *which* pair a
run gets is decided here, when it starts:

1. eligible pairs: those of the spec's pinned hardware class (all pairs when it pins none);
2. healthy ones: not quarantined (``demuxlab.cluster.state``); none left → the run fails at once;
3. preference: pairs this run has not failed on yet, starting at ``lane mod n`` so that lanes and pairs
   usually match one to one and try no lock twice; while any healthy pair it has not failed on exists, a
   retry waits for one of those rather than take a pair it failed on (a dead host that is not yet
   quarantined would otherwise take every attempt of a run whose other pairs are busy);
4. the first pair whose lease (:func:`demuxlab.lease.try_acquire`) is free wins; the quarantine flag is
   read again under the lease; if every pair is busy the scheduler polls until one frees, for at most
   ``wait_s``.

The lease is an OS file lock held by the run's process: it outlives neither the run nor a killed
controller, and needs no cleanup by hand.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from demuxlab.cluster.state import read_state
from demuxlab.errors import LaunchError
from demuxlab.remote.hostpairs import ClusterPair

#: ``try_acquire(pair_name, run_id)`` → a lease (released with ``.release()``) or None when taken.
TryAcquire = Callable[[str, str], Any]


class NoPairError(LaunchError):
    """No eligible healthy pair exists, or none became free in time."""


def default_try_acquire(pair: str, run_id: str) -> Any:
    from demuxlab import lease

    return lease.try_acquire(pair, run_id)


@dataclass(frozen=True)
class Assignment:
    pair: ClusterPair
    lease: Any
    waited_s: float
    tries: int


def preference(pairs: Sequence[ClusterPair], lane: int, tried: set[str]) -> list[ClusterPair]:
    """Rule 3: pairs not tried yet by this run first, each group rotated to start at ``lane mod n``."""
    if not pairs:
        return []
    start = lane % len(pairs)
    rotated = list(pairs[start:]) + list(pairs[:start])
    return [p for p in rotated if p.name not in tried] + [p for p in rotated if p.name in tried]


def eligible_pairs(
    pairs: Sequence[ClusterPair], classes: dict[str, str], pinned: str | None
) -> list[ClusterPair]:
    """Rule 1: the pairs of the pinned hardware class (every pair when none is pinned)."""
    if pinned is None:
        return list(pairs)
    return [p for p in pairs if classes.get(p.name) == pinned]


def assign_pair(
    pairs: Sequence[ClusterPair],
    run_id: str,
    *,
    state: Path,
    lane: int = 0,
    tried: set[str] | None = None,
    wait_s: float = 3600.0,
    poll_s: float = 0.25,
    try_acquire: TryAcquire = default_try_acquire,
) -> Assignment:
    """Lease a free healthy pair out of ``pairs`` (already filtered by class) for ``run_id``."""
    tried = tried or set()
    t0 = time.monotonic()
    deadline = t0 + wait_s
    tries = 0
    while True:
        healthy = [p for p in pairs if not read_state(state, p.name).quarantined]
        if not healthy:
            names = ", ".join(p.name for p in pairs) or "none"
            raise NoPairError(f"no healthy pair left for run {run_id} (quarantined: {names})")
        untried = [p for p in healthy if p.name not in tried]
        for pair in preference(untried or healthy, lane, tried):
            tries += 1
            lease = try_acquire(pair.name, run_id)
            if lease is None:
                continue
            if read_state(state, pair.name).quarantined:  # quarantined while we looked
                lease.release()
                continue
            return Assignment(pair=pair, lease=lease, waited_s=time.monotonic() - t0, tries=tries)
        if time.monotonic() >= deadline:
            raise NoPairError(
                f"no pair free within {wait_s:g} s for run {run_id} ({len(healthy)} healthy, all leased)"
            )
        time.sleep(poll_s)
