"""Synthetic instrumented server exit JSONs (CONTRACTS §1) for the calibration tests: every number known.

The roles, and the timed operations each does per message, are written out here (not taken from
``demuxlab.ctmc.calibrate.ROLES``), so the tests check the calibration against an independent statement
of what each pattern's threads do.
"""

from __future__ import annotations

from typing import Any

# Per pattern: each role's name, its timed operations per message, whether it waits on the notifier.
# The last role handles the messages (works, and gets the untimed CPU as per-message overhead).
SHAPES: dict[str, tuple[tuple[str, tuple[str, ...], bool], ...]] = {
    "reactor": (("reactor", ("recv", "send", "rearm"), True),),
    "multireactor": (("reactor", ("recv", "send", "rearm"), True),),
    "lf": (("leader-follower", ("recv", "send", "rearm"), True),),
    "hsha": (("monitor", ("queue_put",), True), ("worker", ("queue_get", "recv", "send", "rearm"), False)),
    "proactor": (
        ("demultiplexer", ("recv", "queue_put"), True),
        ("handler", ("queue_get", "send", "rearm"), False),
    ),
    "tpc": (("connection", ("send",), False),),
    "uring": (("proactor", (), True),),
    # the completion thread re-submits each receive and the handler submits its echo under the ring's
    # submission lock (timed as rearm and send)
    "uring-shared": (("completion", ("queue_put", "rearm"), True), ("handler", ("queue_get", "send"), False)),
}
THREADS = {"hsha": 2, "proactor": 2, "uring-shared": 2}
DEFAULT_US = {"lock": 0.02, "queue_put": 0.3, "queue_get": 0.4, "recv": 7.5, "send": 2.5, "rearm": 0.7}


def op(mean_ns: float, count: int, p50_ns: float | None = None) -> dict[str, Any]:
    return {
        "count": count,
        "total_ns": round(mean_ns * count),
        "mean_ns": mean_ns,
        "p50_ns": p50_ns or mean_ns,
    }


def notifier_of(pattern: str) -> str:
    return "none" if pattern == "tpc" else "uring" if pattern.startswith("uring") else "epoll-lt"


def server_json(
    pattern: str,
    tau_e_us: float = 2.0,
    scale: int = 1000,
    *,
    true_us: dict[str, float] | None = None,
    alpha_us: float = 0.0,
    overhead_us: float = 0.0,
    inflate: float = 1.0,
    speed: float = 1.0,
    work_us: float = 10.0,
    **over: Any,
) -> dict[str, Any]:
    """A server exit JSON whose per-message CPU is exactly its operations' true times (``true_us``), plus
    ``overhead_us`` per message of the handling role's untimed CPU, plus the work; the operations' wall
    times are ``inflate`` × the true ones (waiting for a CPU); every thread was runnable 1/``speed`` × its
    CPU time; each thread on a CPU of its own. ``over`` replaces top-level fields."""
    us = {**DEFAULT_US, **(true_us or {})}
    messages = 3 * scale
    buckets = [
        {"events": h, "count": 10 * h, "mean_ns": 1000.0 * (alpha_us + tau_e_us * h) * inflate}
        for h in (1, 2, 3, 5, 8, 64)
    ]
    calls = sum(b["count"] for b in buckets)
    notify_total_ns = sum(b["count"] * b["mean_ns"] for b in buckets)
    ops: dict[str, Any] = {}
    detail = []
    elapsed = 10.0
    roles = SHAPES[pattern]
    for i, (role, role_ops, notifies) in enumerate(roles):
        cpu_us = sum(us[o] for o in role_ops) * messages
        for o in role_ops:
            ops[o] = op(us[o] * 1000.0 * inflate, messages)
        if notifies:
            cpu_us += notify_total_ns / 1000.0 / inflate
        handles = i == len(roles) - 1
        if handles:
            cpu_us += (overhead_us + work_us) * messages
        cpu_s = cpu_us / 1e6
        detail.append(
            {
                "index": i,
                "role": role,
                "cpu": i,
                "messages": messages if handles else 0,
                "cpu_s": {"user": cpu_s / 2, "sys": cpu_s / 2},
                "idle_s": elapsed - cpu_s / speed,
                "notify_s": 0.0,
                "wait_s": cpu_s / speed - cpu_s,  # runnable, waiting for a CPU
            }
        )
    ops["lock"] = op(us["lock"] * 1000.0 * 3, 2 * messages, p50_ns=us["lock"] * 1000.0)
    if work_us > 0:
        ops["work"] = op(work_us * 1000.0, messages)
    ops["notify"] = {"count": calls, "total_ns": round(notify_total_ns), "mean_ns": notify_total_ns / calls}
    res: dict[str, Any] = {
        "event": "exit",
        "pattern": pattern,
        "notifier": notifier_of(pattern),
        "threads": THREADS.get(pattern, 1),
        "work_us": work_us,
        "msg_size": 1,
        "instrument": True,
        "messages": messages,
        "connections_accepted": 16,
        "connections_closed": 16,
        "elapsed_s": elapsed,
        "cpu_s": {
            "user": sum(t["cpu_s"]["user"] for t in detail),
            "sys": sum(t["cpu_s"]["sys"] for t in detail),
        },
        "threads_detail": detail,
        "ops": ops,
        # Every message's descriptor returned once (io_uring: its receive and its send completion).
        "events_per_call": {
            "calls": calls,
            "mean": (2 if pattern.startswith("uring") else 1) * messages / calls,
            "max": 64,
            "cache": 64,
        },
        "notify_by_events": buckets,
    }
    if pattern == "tpc":
        del res["ops"]["notify"], res["events_per_call"], res["notify_by_events"]
        # tpc's recv blocks: its time is the thread's waiting (one connection thread in the slot).
        res["connections_accepted"] = 1
        res["threads_detail"][0]["idle_s"] = 0.0
        waited = elapsed - detail[0]["cpu_s"]["user"] * 2 / speed
        res["ops"]["recv"] = {
            "count": messages,
            "total_ns": round(waited * 1e9),
            "mean_ns": waited * 1e9 / messages,
        }
    res.update(over)
    return res
