"""A loaded experiment spec as plain frozen values (CONTRACTS.md §4)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from demuxlab.phases import Phases
from demuxlab.spec.adaptive import Adaptive


@dataclass(frozen=True)
class ClientSpec:
    threads: int
    rate: float | None  # None: closed loop

    def to_json(self) -> dict[str, Any]:
        return {"threads": self.threads, "rate": self.rate}


@dataclass(frozen=True)
class Matrix:
    threads: tuple[int, ...]
    work_us: tuple[float, ...]
    connections: tuple[int, ...]
    msg_size: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "threads": list(self.threads),
            "work_us": list(self.work_us),
            "connections": list(self.connections),
            "msg_size": list(self.msg_size),
        }


@dataclass(frozen=True)
class Design:
    """One pattern over its notifiers. Axes left ``None`` come from the matrix.

    ``resolved_threads[i]`` is the thread list actually run with ``notifiers[i]``: the design's own
    ``threads``, or else ``matrix.threads`` restricted to the range ``demux-server --list`` gives that pair.
    """

    pattern: str
    notifiers: tuple[str, ...]
    threads: tuple[int, ...] | None
    work_us: tuple[float, ...] | None
    connections: tuple[int, ...] | None
    msg_size: tuple[int, ...] | None
    resolved_threads: tuple[tuple[int, ...], ...]

    def to_json(self) -> dict[str, Any]:
        def opt(values: tuple[Any, ...] | None) -> list[Any] | None:
            return None if values is None else list(values)

        return {
            "pattern": self.pattern,
            "notifiers": list(self.notifiers),
            "threads": opt(self.threads),
            "work_us": opt(self.work_us),
            "connections": opt(self.connections),
            "msg_size": opt(self.msg_size),
        }


@dataclass(frozen=True)
class Spec:
    name: str
    description: str
    reproduces: str
    launcher: str
    seed: int
    repeats: int
    phases: Phases
    client: ClientSpec
    designs: tuple[Design, ...]
    matrix: Matrix
    calibration_repeats: int  # instrumented runs per calibration point (0: none)
    text: str  # the file as read, for the record and the database
    sha256: str  # of the file's bytes; part of every run id
    path: str
    hardware_class: str | None = None  # cluster sweeps: run only on pairs of this class (hw-…)
    adaptive: Adaptive | None = None  # an adaptive sweep's settings (docs/adaptive.md); None: fixed design

    @property
    def max_repeats(self) -> int:
        """The most runs any measured point may get: ``repeats``, or an adaptive sweep's maximum."""
        if self.adaptive is not None and self.adaptive.repeats is not None:
            return max(self.repeats, self.adaptive.repeats.max)
        return self.repeats

    @property
    def run_s(self) -> float:
        """Seconds of phases of one run that measures its whole measure phase."""
        return self.phases.warmup_s + self.phases.measure_s + self.phases.cooldown_s

    def to_json(self) -> dict[str, Any]:
        """The spec with every default filled in, in the file's layout."""
        return {
            "name": self.name,
            "description": self.description,
            "reproduces": self.reproduces,
            "launcher": self.launcher,
            "seed": self.seed,
            "repeats": self.repeats,
            "phases": self.phases.to_json(),
            "client": self.client.to_json(),
            "designs": [design.to_json() for design in self.designs],
            "matrix": self.matrix.to_json(),
            "calibration": {"repeats": self.calibration_repeats},
            **({"hardware_class": self.hardware_class} if self.hardware_class else {}),
            **({"adaptive": self.adaptive.to_json()} if self.adaptive is not None else {}),
        }
