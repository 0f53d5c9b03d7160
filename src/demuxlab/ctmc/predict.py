"""One entry point for every solver: a prediction per (pattern, threads, work) point."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from demuxlab.ctmc.rates import Rates, build
from demuxlab.errors import DemuxlabError

METHODS: tuple[str, ...] = ("ssa", "fluid", "exact")


@dataclass(frozen=True)
class Prediction:
    pattern: str
    threads: int
    work_us: float
    connections: int
    method: str
    throughput_msgs_per_s: float
    ci_halfwidth_rel: float | None
    details: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "threads": self.threads,
            "work_us": self.work_us,
            "connections": self.connections,
            "method": self.method,
            "throughput_msgs_per_s": self.throughput_msgs_per_s,
            "ci_halfwidth_rel": self.ci_halfwidth_rel,
        }


def predict(
    pattern: str,
    threads: int,
    work_us: float,
    *,
    method: str = "ssa",
    connections: int = 512,
    rates: Rates | None = None,
    rel_ci: float = 0.01,
    seed: int = 0,
) -> Prediction:
    if method not in METHODS:
        raise DemuxlabError(f"method: must be one of {', '.join(METHODS)}, got {method!r}")
    model = build(pattern, threads, work_us, connections, rates)
    ci: float | None = None
    details: dict[str, Any] = {}
    if method == "ssa":
        from demuxlab.ctmc.ssa import simulate

        s = simulate(model, rel_ci=rel_ci, seed=seed)
        thr, ci = s.throughput_msgs_per_s, s.ci_halfwidth_rel
        details = {"events": s.events, "simulated_us": s.simulated_us, "converged": s.converged, "seed": seed}
    elif method == "fluid":
        from demuxlab.ctmc.fluid import solve_fluid

        f = solve_fluid(model)
        thr = f.throughput_msgs_per_s
        details = {"horizon_us": f.horizon_us, "residual": f.residual, "converged": f.converged}
    else:
        from demuxlab.ctmc.exact import solve_exact

        e = solve_exact(model)
        thr = e.throughput_msgs_per_s
        details = {"states": e.states, "transitions": e.transitions}
    return Prediction(pattern, threads, float(work_us), connections, method, float(thr), ci, details)
