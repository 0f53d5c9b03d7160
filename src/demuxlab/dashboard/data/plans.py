"""What an experiment's spec plans, as this machine's server would run it: the runs to expect and the points
the server's thread ranges cut (``demux-server --list``), each with its reason.

A spec stored in the database is loaded again from its text. Loaded alone (no pair list), a design without
its own ``threads`` takes ``matrix.threads`` as is; the workflow loads it against the server's pairs, which
cut each design's thread counts to its pair's ``min_threads..max_threads`` (HSHA needs 2, a reactor takes
exactly 1). Counting the first way made a finished ``smoke`` show 8 runs "remaining" for ever; here the
difference is listed as *cut*, apart from the runs remaining.
"""

from __future__ import annotations

import functools
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Cut:
    point_key: str
    runs: int
    reason: str


@dataclass(frozen=True)
class Plan:
    runs: int | None  # runs the spec plans on this server (measured and calibration); None: unknown
    cut: tuple[Cut, ...] = ()  # points the spec names that the server's pairs cannot run
    exact: bool = True  # False: thread ranges unknown, ``runs`` may count points the server would cut
    note: str | None = None  # why ``runs`` is None or not exact

    @property
    def cut_runs(self) -> int:
        return sum(c.runs for c in self.cut)


@functools.lru_cache(maxsize=256)
def plan(name: str, spec_sha256: str, spec_text: str | None) -> Plan:
    """The plan of a stored spec (cached: a spec's text never changes under its hash; a rebuilt server with
    other thread ranges is asked again by :func:`demuxlab.designs.valid_pairs`' own cache only on restart)."""
    del spec_sha256  # part of the cache key
    if not spec_text:
        return Plan(None, note="the spec's text is not stored with this experiment")
    from demuxlab.designs import pairs_by_key, valid_pairs
    from demuxlab.errors import DemuxlabError
    from demuxlab.spec import load_spec, run_order

    with tempfile.TemporaryDirectory(prefix="dlx-dash-") as tmp:
        path = Path(tmp) / f"{name}.yaml"  # the spec's name must match its file's
        try:
            path.write_text(spec_text)
            loose = run_order(load_spec(path))
        except (DemuxlabError, OSError) as exc:
            return Plan(None, note=f"the stored spec no longer loads: {_message(exc)}")
        try:
            pairs = valid_pairs()
        except DemuxlabError as exc:
            return Plan(
                len(loose),
                exact=False,
                note="thread ranges unknown (no demux-server here to ask --list: "
                f"{_message(exc)}); the runs planned may include points the server would cut",
            )
        try:
            planned = run_order(load_spec(path, pairs=pairs))
        except DemuxlabError as exc:
            return Plan(
                len(loose),
                exact=False,
                note=f"this machine's demux-server cannot run the spec as stored ({_message(exc)})",
            )
    keep = {p.point_key for p, _ in planned}
    by_key = pairs_by_key(pairs)
    cut: dict[str, Cut] = {}
    for point, _ in loose:
        if point.point_key in keep:
            continue
        pair = by_key.get((point.pattern, point.notifier))
        if pair is None:
            reason = f"demux-server offers no {point.pattern} with {point.notifier}"
        elif pair.min_threads == pair.max_threads:
            reason = (
                f"{point.pattern}/{point.notifier} takes exactly {pair.min_threads} thread"
                f"{'s' * (pair.min_threads != 1)}, not {point.threads} (demux-server --list)"
            )
        else:
            reason = (
                f"{point.pattern}/{point.notifier} takes {pair.min_threads}–{pair.max_threads} threads, "
                f"not {point.threads} (demux-server --list)"
            )
        prev = cut.get(point.point_key)
        cut[point.point_key] = Cut(point.point_key, (prev.runs if prev else 0) + 1, reason)
    return Plan(len(planned), tuple(cut.values()))


def _message(exc: Exception) -> str:
    text = getattr(exc, "message", None) or str(exc)
    return str(text).splitlines()[0][:200]
