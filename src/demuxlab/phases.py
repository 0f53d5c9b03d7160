"""The phases of one run (warm-up, measure, cool-down), apart from the spec that sets them: the launchers
and the benchmarks build run requests from it without the spec's schema and YAML libraries."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Phases:
    warmup_s: float
    measure_s: float
    cooldown_s: float

    def to_json(self) -> dict[str, float]:
        return {"warmup_s": self.warmup_s, "measure_s": self.measure_s, "cooldown_s": self.cooldown_s}
