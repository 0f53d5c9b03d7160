"""The plain runs of a calibration point (issue 43): the speed of the server without its instrumentation.

An instrumented server reads the clock around every timed operation and makes one more notifier call
before each that blocks (CONTRACTS §1); on the 2-core host that made the runs of one point ~11 % slower at
0 µs of work than the plain runs of the same point, and a calibration that took the instrumented runs' CPU
per message predicted every plain run that much too slow. So the calibration takes **each operation's share**
of a role's CPU from the instrumented runs (what no plain run can say) and the role's **CPU per message**
from the plain runs of the same points (same pattern, notifier, threads, work, connections and size): per
role, the factor D_plain / D_instr of its CPU per message less the work, over the work values both sets
ran, scales every rate of that role (its operations, its notifier's τ and α, its untimed CPU). The
server's share of its CPUs (``speed``) is the plain runs' too, and the self-check judges the fitted model
against the plain runs' throughput: the figure a prediction is compared with.

Also here: the parts of a calibration that can be left out (:data:`ABLATIONS`), for the rate ablation of
docs/ctmc.md (``bench/fidelity/ctmc_validation.py --ablate``): the held-out error with and without each.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from demuxlab.ctmc.fit_runs import _cpu_s, _messages, _role_cpu_s, _work_spun_us
from demuxlab.ctmc.rates import INSTANT_RATE, Rates, calibration_threads
from demuxlab.ctmc.registry import model_of
from demuxlab.errors import DemuxlabError

# A role's plain-run CPU per message this far from its instrumented runs' (either way) is not the same point:
# the calibration is refused (CalibrationRefused, by calibrate.py).
MAX_PACE_FACTOR = 3.0
# The seed 001 rates an ablation can put back in place of the measured ones.
SEED_RATES: tuple[str, ...] = ("r_l", "r_p", "r_g", "r_i", "r_o", "r_a", "r_e")
# What leaving each part out does (calibrate(..., off=...)).
ABLATIONS: dict[str, str] = {
    "pace": "the instrumented runs' CPU per message (the roles' and the client's), not the plain runs'",
    "speed": "the server had all its CPUs (speed 1)",
    "r_n": "no per-call notifier cost (α = 0)",
    "r_x": "no untimed CPU",
    "r_z": "an instant client: no turnaround, no wake-ups",
    "r_v": "the client's wake-ups of a sleeping dispatcher not charged (nor its sleeps, r_u)",
    "r_u": "the client's sleeps not fitted: a woken client runs at once",
    "r_k": "no kicks: a kick's CPU is untimed CPU",
    "r_w": "processor sharing where the calibration runs' threads outnumbered the cores",
    "r_h": "a released lock goes to its sleeping waiter at once",
    **{rate: "seed 001's value instead of the measured one" for rate in SEED_RATES},
}


@dataclass(frozen=True)
class PlainRun:
    """An uninstrumented run of a calibration point: its server's exit JSON (CONTRACTS §1, no ``ops``), its
    measured throughput (msgs/s; None: not measured), and optionally the client's JSON, CPUs and the
    connections (default: the server's ``connections_accepted``)."""

    server: dict[str, Any]
    measured: float | None
    client: dict[str, Any] | None = None
    client_cores: int | None = None
    connections: int | None = None

    @property
    def workload(self) -> tuple[int, int]:
        """(connections, message size), as a calibration groups its runs."""
        conns = self.connections if self.connections is not None else self.server.get("connections_accepted")
        return int(conns or 0), int(self.server.get("msg_size") or 0)


def checked_off(off: Collection[str], pattern: str) -> frozenset[str]:
    """``off`` as a set, every name one of :data:`ABLATIONS`."""
    bad = sorted(set(off) - set(ABLATIONS))
    if bad:
        raise DemuxlabError(
            f"calibrate {pattern}: off: {bad[0]!r} is not a part to leave out (one of {', '.join(ABLATIONS)})"
        )
    return frozenset(off)


def checked_plain(plain: Sequence[PlainRun], pattern: str, notifier: str) -> list[str]:
    """Names for the plain runs, each checked to be an uninstrumented run of the calibration point's
    pattern, notifier and concurrency with the per-thread CPU times a pace needs."""
    names = []
    threads = calibration_threads(pattern)
    roles = model_of(pattern).roles
    for i, run in enumerate(plain):
        name, res = f"plain run #{i}", run.server
        if not isinstance(res, dict):
            raise DemuxlabError(f"calibrate {pattern}: {name}: server result is not a JSON object")
        got = (res.get("pattern"), res.get("notifier"), res.get("threads"))
        if got != (pattern, notifier, threads):
            raise DemuxlabError(
                f"calibrate {pattern}/{notifier}: {name}: is {got[0]}/{got[1]} at {got[2]} threads, not the "
                f"calibration point's {threads}"
            )
        if res.get("instrument") is True:
            raise DemuxlabError(f"calibrate {pattern}/{notifier}: {name}: instrumented, not a plain run")
        _messages(name, res)
        detail = res.get("threads_detail")
        if not isinstance(detail, list) or not all(
            isinstance(t, dict) and isinstance(t.get("cpu_s"), dict) for t in detail
        ):
            raise DemuxlabError(
                f"calibrate {pattern}/{notifier}: {name}: threads_detail needs cpu_s per thread"
            )
        for role in roles:
            if not any(t.get("role") in role.names for t in detail):
                raise DemuxlabError(
                    f"calibrate {pattern}/{notifier}: {name}: no thread with role {role.names[0]!r}"
                )
        names.append(name)
    return names


def _role_demand_by_work(results: Sequence[dict[str, Any]], role: Any) -> dict[float, tuple[float, int]]:
    """Per work value: (the role's CPU per message less the work, µs, the messages), pooled over runs."""
    cpu: dict[float, float] = {}
    msgs: dict[float, int] = {}
    for res in results:
        w = _work_spun_us(res)
        cpu[w] = cpu.get(w, 0.0) + _role_cpu_s(res, role) * 1e6
        msgs[w] = msgs.get(w, 0) + _messages("", res)
    return {w: (cpu[w] / msgs[w] - (w if role.works else 0.0), msgs[w]) for w in cpu}


def role_paces(
    pattern: str, instrumented: Sequence[dict[str, Any]], plain: Sequence[dict[str, Any]]
) -> dict[str, float]:
    """Per role (its first name): D_plain / D_instr, its CPU per message less the work in the plain runs over
    the instrumented ones', over the work values both ran, each weighted by the instrumented runs'
    messages at it (as the fit pools them). A role without a positive demand in either is left out."""
    out: dict[str, float] = {}
    for role in model_of(pattern).roles:
        f = _pace(_role_demand_by_work(instrumented, role), _role_demand_by_work(plain, role))
        if f is not None:
            out[role.names[0]] = f
    return out


def _pace(instr: dict[float, tuple[float, int]], bare: dict[float, tuple[float, int]]) -> float | None:
    """D_plain / D_instr from per-work-value (CPU per message, messages) of the instrumented and the plain
    runs: over the work values both ran, each weighted by the instrumented runs' messages at it (as the fit
    pools them); None where they share none or either demand is not positive."""
    common = sorted(set(instr) & set(bare))
    weight = sum(instr[w][1] for w in common)
    if not common or weight <= 0:
        return None
    d_instr = sum(instr[w][0] * instr[w][1] for w in common) / weight
    d_plain = sum(bare[w][0] * instr[w][1] for w in common) / weight
    return d_plain / d_instr if d_instr > 0.0 and d_plain > 0.0 else None


def _client_demand_by_work(
    servers: Sequence[dict[str, Any]], clients: Sequence[dict[str, Any] | None]
) -> dict[float, tuple[float, int]]:
    """Per work value (the server's): (the client's CPU per message, µs, its messages), pooled over runs."""
    cpu: dict[float, float] = {}
    msgs: dict[float, int] = {}
    for res, c in zip(servers, clients, strict=True):
        if not isinstance(c, dict):
            continue
        used, m = _cpu_s(c.get("cpu_s")), c.get("messages")
        if used is None or not isinstance(m, int) or isinstance(m, bool) or m <= 0:
            continue
        w = _work_spun_us(res)
        cpu[w] = cpu.get(w, 0.0) + used * 1e6
        msgs[w] = msgs.get(w, 0) + m
    return {w: (cpu[w] / msgs[w], msgs[w]) for w in cpu}


def client_pace(
    instrumented: Sequence[dict[str, Any]],
    clients: Sequence[dict[str, Any] | None] | None,
    plain: Sequence[PlainRun],
) -> float | None:
    """The client's pace, as :func:`role_paces` a role's: its CPU per message in the plain runs over the
    instrumented runs', over the work values both ran, weighted by the instrumented runs' messages at each.
    At 0 µs a one-thread server turns messages around as fast as the client does (its CPU ~90 % busy), so
    the client's CPU per message is the point's throughput, and one instrumented run's can be 30 % off its
    plain runs' (the host's noise, or the slower instrumented server's client sleeping more). None without
    client results in both."""
    if clients is None:
        return None
    return _pace(
        _client_demand_by_work(instrumented, clients),
        _client_demand_by_work([r.server for r in plain], [r.client for r in plain]),
    )


def apply_paces(
    pattern: str, paces: dict[str, float], values: dict[str, Any], source: dict[str, str]
) -> None:
    """Every fitted rate of each role in ``paces`` scaled by its factor (a cost × f is a rate / f): its
    operations', and its notifier's τ and α where it calls the notifier, its untimed CPU where it handles
    messages, its kicks. Instant and paper rates stay as they are (nothing of the role's was measured in
    them)."""
    for role in model_of(pattern).roles:
        f = paces.get(role.names[0])
        if f is None:
            continue
        rates = [rate for _op, rate in role.ops]
        if role.notifies:
            rates += ["r_e", "r_n"]
        if role.overhead == "r_x":
            rates.append("r_x")
        for rate in dict.fromkeys(rates):
            why = source.get(rate, "")
            if (
                rate not in values
                or values[rate] >= INSTANT_RATE
                or not why
                or why.startswith(("instant", "paper"))
            ):
                continue
            values[rate] = values[rate] / f
            source[rate] = f"{why} ×{f:.3g} (plain runs' cpu)"


def pace_note(paces: dict[str, float]) -> str:
    """How ``speed``'s source says where the paces came from."""
    each = ", ".join(f"the {role}'s ×{f:.3g}" for role, f in paces.items())
    return f"; cpu per message of the plain runs over the instrumented runs': {each}" if paces else ""


def leave_out(off: frozenset[str], paper: Rates, values: dict[str, Any], source: dict[str, str]) -> None:
    """The ablation's parts that are rates (``off``): seed 001's value back in place of a measured one,
    α or the untimed CPU instant; each source says so."""
    for rate in off & set(SEED_RATES):
        values[rate] = float(getattr(paper, rate))
        source[rate] = f"{paper.source.get(rate, 'paper')} (ablation: {ABLATIONS[rate]})"
    for rate in off & {"r_n", "r_x"}:
        values[rate] = INSTANT_RATE
        source[rate] = f"instant:ablation: {ABLATIONS[rate]}"
