"""Service rates of the models (per µs) and the model instances built from them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from demuxlab.ctmc import hsha, lf
from demuxlab.ctmc.engine import FloatArray, ModelInstance, ModelStructure
from demuxlab.errors import DemuxlabError

PATTERNS: tuple[str, ...] = ("hsha", "lf")
RATE_FIELDS: tuple[str, ...] = ("r_l", "r_p", "r_g", "r_t", "r_i", "r_o", "r_a", "r_e")


@dataclass(frozen=True)
class Rates:
    """The eight service rates of seed 001 §V-A, per µs. r_c (work) is an input of each prediction.

    ``source`` says, per rate, where the value came from (``paper`` or the op it was measured from).
    """

    r_l: float
    r_p: float
    r_g: float
    r_t: float
    r_i: float
    r_o: float
    r_a: float
    r_e: float
    source: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        for name in RATE_FIELDS:
            v = getattr(self, name)
            if not (isinstance(v, int | float) and np.isfinite(v) and v > 0):
                raise DemuxlabError(f"rates: {name}: must be a positive finite number per µs, got {v!r}")

    def as_dict(self) -> dict[str, float]:
        return {k: float(v) for k, v in asdict(self).items() if k in RATE_FIELDS}

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "rates") -> Rates:
        missing = [k for k in RATE_FIELDS if k not in data]
        if missing:
            raise DemuxlabError(f"{where}: missing rate {missing[0]!r}")
        try:
            values = {k: float(data[k]) for k in RATE_FIELDS}
        except (TypeError, ValueError):
            raise DemuxlabError(f"{where}: rates must be numbers, got {data!r}") from None
        src = data.get("source")
        return cls(**values, source=dict(src) if isinstance(src, dict) else {})

    def vector(self, work_us: float) -> FloatArray:
        """The rate vector the generating functions read (engine.RATE_NAMES order, r_c = 1/work_us)."""
        if not (np.isfinite(work_us) and work_us > 0):
            raise DemuxlabError(f"work_us: must be positive (r_c = 1/work_us), got {work_us!r}")
        return np.array([*(getattr(self, k) for k in RATE_FIELDS), 1.0 / work_us], dtype=np.float64)


def paper_rates(pattern: str) -> Rates:
    """Seed 001 §V-A: the rates measured on the paper's 2×8 Opteron (r_e differs between the patterns)."""
    check_pattern(pattern)
    return Rates(
        r_l=1 / 0.013,
        r_p=1 / 0.215,
        r_g=1 / 0.256,
        r_t=1 / 0.01,
        r_i=1 / 9.2,
        r_o=1 / 1.9,
        r_a=1 / 0.589,
        r_e=1 / 2.9 if pattern == "hsha" else 1 / 0.635,
        source={k: "paper" for k in RATE_FIELDS},
    )


def check_pattern(pattern: str) -> None:
    if pattern not in PATTERNS:
        raise DemuxlabError(f"pattern: must be one of {', '.join(PATTERNS)}, got {pattern!r}")


def structure(pattern: str) -> ModelStructure:
    check_pattern(pattern)
    return hsha.STRUCTURE if pattern == "hsha" else lf.STRUCTURE


def min_threads(pattern: str) -> int:
    return 2 if pattern == "hsha" else 1


def build(
    pattern: str, threads: int, work_us: float, connections: int = 512, rates: Rates | None = None
) -> ModelInstance:
    """The CTMC of ``pattern`` with ``threads`` threads in total (HSHA: 1 monitor + threads − 1 workers)."""
    check_pattern(pattern)
    lo = min_threads(pattern)
    if not isinstance(threads, int) or threads < lo:
        raise DemuxlabError(f"threads: {pattern} needs at least {lo} thread(s), got {threads!r}")
    if not isinstance(connections, int) or connections < 1:
        raise DemuxlabError(f"connections: must be a positive integer, got {connections!r}")
    rates = rates if rates is not None else paper_rates(pattern)
    init = (hsha.initial_state if pattern == "hsha" else lf.initial_state)(threads, connections)
    return ModelInstance(
        structure=structure(pattern),
        initial=init,
        r=rates.vector(work_us),
        parameters={
            "pattern": pattern,
            "threads": threads,
            "work_us": float(work_us),
            "connections": connections,
            "rates": rates.as_dict(),
        },
    )
