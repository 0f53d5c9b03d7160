"""Lists of model parameters as a person types them: thread counts ``1-16``, ``2,4,8`` or ``1-4,8``, and work
values ``10,20,50`` (the ``demuxlab model predict`` options, the dashboard's what-if fields).

Pure: text in, sorted numbers out; a bad list is one :class:`~demuxlab.errors.DemuxlabError` naming the
option (``what``) and the text.
"""

from __future__ import annotations

from demuxlab.errors import DemuxlabError


def parse_int_list(text: str, what: str = "threads") -> list[int]:
    """'1-16', '2,4,8', '1-4,8' → sorted unique ints."""
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        try:
            if "-" in part:
                lo_s, hi_s = part.split("-", 1)
                lo, hi = int(lo_s), int(hi_s)
                if lo > hi:
                    raise ValueError
                out.update(range(lo, hi + 1))
            else:
                out.add(int(part))
        except ValueError:
            raise DemuxlabError(f"--{what}: bad list or range {text!r} (e.g. 1-16 or 2,4,8)") from None
    if not out or min(out) < 1:
        raise DemuxlabError(f"--{what}: values must be positive integers, got {text!r}")
    return sorted(out)


def parse_float_list(text: str, what: str, *, zero: bool = False) -> list[float]:
    """'10,20,50' → floats, each positive (``zero``: or 0, e.g. work: an echo without work)."""
    try:
        vals = [float(v) for v in text.split(",")]
    except ValueError:
        raise DemuxlabError(f"--{what}: bad number list {text!r}") from None
    if any(not (v > 0 or (zero and v == 0)) for v in vals):
        kind = "non-negative" if zero else "positive"
        raise DemuxlabError(f"--{what}: values must be {kind}, got {text!r}")
    return vals
