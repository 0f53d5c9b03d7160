"""The calibration's reading of the runs (calibrate.py): what the server's exit JSON (CONTRACTS.md §1,
``--instrument``) and the client's (§2) hold, each figure read one way, checked, with one clear error for a
field that is not what the contract says; and the calibration's refusal (:class:`CalibrationRefused`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from demuxlab.ctmc.pattern import OpRole
from demuxlab.ctmc.rates import calibration_threads
from demuxlab.ctmc.registry import model_of
from demuxlab.errors import DemuxlabError

CACHE_SIZE = 64  # the server's MAX_EVENTS: no notifier call returns more


MAX_OVERHEAD_US = 10_000.0  # an untimed CPU per message or per call beyond this is an artefact


KICK_RATE = "r_k"  # fitted per kick (ops.kick), not per message as the other operations' rates


class CalibrationRefused(DemuxlabError):
    """The runs give rates the calibration will not stand behind (see the module's Refusals)."""


# A calibration run's setting: (work µs, connections, the server's cores, the client's threads and cores).
Workload = tuple[float, int, int | None, int | None, int | None]


def _workload(
    pattern: str,
    i: int,
    res: dict[str, Any],
    connections: Sequence[int | None] | None,
    clients: Sequence[dict[str, Any] | None] | None,
    client_cores: Sequence[int | None] | None,
) -> Workload | None:
    """Run i's setting, or None where its work is not a non-negative number."""
    work = res.get("work_us")
    conns = connections[i] if connections is not None else None
    conns = conns if conns is not None else res.get("connections_accepted")
    if not isinstance(work, int | float) or work < 0:
        return None
    if not isinstance(conns, int) or conns < 1:
        raise DemuxlabError(f"calibrate {pattern}: connections of run #{i} unknown ({conns!r})")
    client = clients[i] if clients is not None else None
    cthreads = client.get("threads") if isinstance(client, dict) else None
    ccores = client_cores[i] if client_cores is not None else None
    return (float(work), conns, server_cores(res, pattern), cthreads, ccores)


def server_cores(res: dict[str, Any], pattern: str) -> int | None:
    """The number of distinct CPUs the threads of the pattern's chain roles were pinned to
    (``threads_detail[].cpu``), or None where any of them was not pinned. A thread the chain leaves out
    (tpc's acceptor) can sit on a CPU none of the modelled threads uses (tpc at one thread: its connection
    threads on one CPU, the acceptor on the next); counting that CPU would give them a core they never
    had."""
    detail = res.get("threads_detail")
    if not isinstance(detail, list) or not detail:
        return None
    names = {n for r in model_of(pattern).roles for n in r.names}
    cpus = [t.get("cpu") for t in detail if isinstance(t, dict) and t.get("role") in names]
    if not cpus:
        return None
    if any(not isinstance(c, int) or isinstance(c, bool) for c in cpus):
        return None
    return len(set(cpus))


def _check_run(name: str, res: Any, pattern: str) -> None:
    if not isinstance(res, dict):
        raise DemuxlabError(f"calibrate: {name}: server result is not a JSON object")
    if res.get("pattern") != pattern:
        raise DemuxlabError(
            f"calibrate {pattern}: {name}: pattern is {res.get('pattern')!r}, not {pattern!r}"
        )
    lo = calibration_threads(pattern)
    if res.get("threads") != lo:
        raise DemuxlabError(
            f"calibrate {pattern}: {name}: threads={res.get('threads')!r}; calibration needs the lowest "
            f"concurrency, threads={lo}"
        )
    if res.get("instrument") is not True or not isinstance(res.get("ops"), dict):
        raise DemuxlabError(
            f"calibrate {pattern}: {name}: not an instrumented run (no ops; use --instrument)"
        )
    _messages(name, res)
    detail = res.get("threads_detail")
    if not isinstance(detail, list) or not detail or not all(isinstance(t, dict) for t in detail):
        raise DemuxlabError(
            f"calibrate {pattern}: {name}: threads_detail is missing (needed for the CPU times)"
        )
    for role in model_of(pattern).roles:
        if not any(t.get("role") in role.names for t in detail):
            raise DemuxlabError(
                f"calibrate {pattern}: {name}: no thread with role {role.names[0]!r} in threads_detail"
            )
    for t in detail:
        cpu = t.get("cpu_s")
        if not isinstance(cpu, dict) or not all(isinstance(cpu.get(k), int | float) for k in ("user", "sys")):
            raise DemuxlabError(
                f"calibrate {pattern}: {name}: threads_detail[{t.get('index')}].cpu_s needs user and sys"
            )


def _messages(name: str, res: dict[str, Any]) -> int:
    m = res.get("messages")
    if isinstance(m, bool) or not isinstance(m, int) or m <= 0:
        raise DemuxlabError(
            f"calibrate {res.get('pattern')}: {name}: messages must be a positive integer, got {m!r}"
        )
    return m


def _events_mean(res: dict[str, Any]) -> float:
    """The descriptors (completions) one notifier call returned on average (``events_per_call.mean``)."""
    epc = res.get("events_per_call")
    mean = epc.get("mean") if isinstance(epc, dict) else None
    return float(mean) if isinstance(mean, int | float) and not isinstance(mean, bool) and mean > 0 else 0.0


def _calls(res: dict[str, Any]) -> int:
    epc = res.get("events_per_call")
    calls = epc.get("calls") if isinstance(epc, dict) else None
    return calls if isinstance(calls, int) and calls > 0 else 0


def _role_cpu_s(res: dict[str, Any], role: OpRole) -> float:
    return sum(
        float(t["cpu_s"]["user"]) + float(t["cpu_s"]["sys"])
        for t in res["threads_detail"]
        if t.get("role") in role.names
    )


def _work_spun_us(res: dict[str, Any]) -> float:
    """The work per message: the nominal ``work_us`` (the spin's CPU; its wall time, ``work``, may include
    preemption). 0 without work."""
    work = res.get("work_us")
    return float(work) if isinstance(work, int | float) and work > 0 else 0.0


def _op_total_ns(name: str, res: dict[str, Any], op: str, required: bool = True) -> float:
    entry = res["ops"].get(op)
    if entry is None and not required:
        return 0.0
    if not isinstance(entry, dict):
        raise DemuxlabError(f"calibrate {res.get('pattern')}: {name}: op {op!r} is missing from ops")
    count = entry.get("count")
    if not isinstance(count, int) or count <= 0:
        raise DemuxlabError(f"calibrate: {name}: ops.{op}.count must be a positive integer, got {count!r}")
    total = entry.get("total_ns")
    if not isinstance(total, int | float):
        mean = entry.get("mean_ns")
        if not isinstance(mean, int | float):
            raise DemuxlabError(f"calibrate: {name}: ops.{op} has neither total_ns nor mean_ns")
        total = float(mean) * count
    return float(total)


def _kicks(results: Sequence[dict[str, Any]]) -> int:
    """The re-arms' kicks of a waiting dispatcher over the runs (``ops.kick.count``; 0 where none)."""
    got = 0
    for res in results:
        count = (res["ops"].get("kick") or {}).get("count")
        got += count if isinstance(count, int) and count > 0 else 0
    return got


def _lock_median_us(results: Sequence[dict[str, Any]]) -> float | None:
    """The ``lock`` op's median (µs), weighted by the runs' counts; None where no run has it."""
    num = 0.0
    den = 0
    for res in results:
        entry = res["ops"].get("lock")
        if not isinstance(entry, dict):
            continue
        count, p50 = entry.get("count"), entry.get("p50_ns", entry.get("mean_ns"))
        if isinstance(count, int) and count > 0 and isinstance(p50, int | float) and p50 > 0:
            num += count * float(p50)
            den += count
    return num / den / 1000.0 if den else None


def _cpu_s(times: Any) -> float | None:
    """A client's CPU seconds, user + sys, from its ``cpu_s`` (CONTRACTS §2); None where it has none."""
    if not isinstance(times, dict):
        return None
    return float(times.get("user", 0.0)) + float(times.get("sys", 0.0))


def _client_sleeps(pattern: str, i: int, client: dict[str, Any] | None) -> tuple[float, float] | None:
    """The client's sleeps and messages over its measure phase (client result #``i``'s ``sleeps``,
    ``messages``), or None where it did not count them (no ``sleeps``, or null: a client from before the
    count, or one whose threads could not read theirs; or no client). A ``sleeps`` that is not a
    non-negative integer is an error, not "not counted"."""
    if not isinstance(client, dict):
        return None
    n, m = client.get("sleeps"), client.get("messages")
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise DemuxlabError(
            f"calibrate {pattern}: client result #{i}: sleeps must be a non-negative integer or null, "
            f"got {n!r}"
        )
    if isinstance(m, bool) or not isinstance(m, int) or m <= 0:
        return None
    return float(n), float(m)


def _woke(i: int, res: dict[str, Any]) -> tuple[int, int] | None:
    """(the requests that woke the dispatcher, the messages) of server result #``i``: its blocking waits
    in the notifier (``idle``, CONTRACTS §1) less the waits a re-arm's kick ended (``kick``), at least 0;
    None for a run without the ``idle`` timing (uninstrumented, or from before it)."""
    ops = res.get("ops")
    idle = ops.get("idle") if isinstance(ops, dict) else None
    if not isinstance(ops, dict) or not isinstance(idle, dict):
        return None
    waits = idle.get("count")
    if isinstance(waits, bool) or not isinstance(waits, int) or waits < 0:
        raise DemuxlabError(
            f"calibrate {res.get('pattern')}: server result #{i}: ops.idle.count must be a non-negative "
            f"integer, got {waits!r}"
        )
    return max(waits - _kicks([res]), 0), _messages(f"server result #{i}", res)


def _timed_events(res: dict[str, Any]) -> float:
    """The descriptors the timed notifier calls returned (Σ ``notify_by_events`` events × count)."""
    buckets = res.get("notify_by_events")
    return float(
        sum(b["events"] * b["count"] for b in buckets if isinstance(b, dict))
        if isinstance(buckets, list)
        else 0
    )


def _mean_events(results: Sequence[dict[str, Any]]) -> float:
    """The mean descriptors per notifier call that returned some (``notify_by_events``), at least 1."""
    n = h = 0.0
    for res in results:
        for b in res.get("notify_by_events") or []:
            if isinstance(b, dict) and isinstance(b.get("count"), int) and isinstance(b.get("events"), int):
                n += b["count"]
                h += b["count"] * b["events"]
    return max(h / n, 1.0) if n else 1.0


def _lowest_work(results: Sequence[dict[str, Any]]) -> list[int]:
    """The indices of the runs with the least work per message."""
    least = min(_work_spun_us(r) for r in results)
    return [i for i, r in enumerate(results) if _work_spun_us(r) == least]
