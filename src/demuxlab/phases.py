"""The phases of a run (warm-up, measure, cool-down): a bottom-layer type, so that what only runs a point
(the lean run start-up, :mod:`demuxlab.runpoint_lean`) need not import the spec's YAML and schema checks.
:mod:`demuxlab.spec` re-exports it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Phases:
    warmup_s: float
    measure_s: float
    cooldown_s: float

    def to_json(self) -> dict[str, float]:
        return {"warmup_s": self.warmup_s, "measure_s": self.measure_s, "cooldown_s": self.cooldown_s}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Phases:
        return cls(float(doc["warmup_s"]), float(doc["measure_s"]), float(doc["cooldown_s"]))

    @property
    def total_s(self) -> float:
        return self.warmup_s + self.measure_s + self.cooldown_s
