"""A run's costs per message, in the kernel's terms (issue 44): from the record's ``costs`` (the counters
``demuxlab.launch.counters`` read at the measure phase's start and end, docs/CONTRACTS.md §5), what each
message cost each side: CPU time (the process's own, by user and system; the side's CPUs', by kind:
softirq, irq, steal, ...), context switches, migrations, system calls (the binaries' own counts, over the
interval between their own two reports, ``syscalls_interval_s``), TCP retransmits and drops, the CPU's
cycles and instructions (hardware counters), energy.

Pure: the record's members in, :class:`Cost` rows out (the ``run_costs`` table's, the Run page's "why",
the Sweep's cost axis). A side's messages are the run's throughput (``stats``) times the side's own
interval between its two readings, so a reading that came late at one end does not skew the ratio. A value
the host could not give stays ``unavailable: <why>`` (``Cost.unavailable``), never a zero.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

UNAVAILABLE = "unavailable: "
SIDES: tuple[str, ...] = ("server", "client")


@dataclass(frozen=True)
class Metric:
    """A cost: its name (``run_costs.metric``), what a value means, and the unit per message."""

    name: str
    label: str
    unit: str  # of per_message
    scale: float  # per_message = value / messages * scale


#: Every metric, in the order the why panel shows them; a name is stable (the Sweep's cost axis keys).
METRICS: tuple[Metric, ...] = (
    Metric("cpu_user_s", "process CPU, user", "µs/msg", 1e6),
    Metric("cpu_sys_s", "process CPU, system", "µs/msg", 1e6),
    Metric("syscalls", "system calls", "calls/msg", 1.0),
    Metric("ctx_voluntary", "voluntary context switches (it blocked)", "switches/msg", 1.0),
    Metric("ctx_involuntary", "involuntary context switches (preempted)", "switches/msg", 1.0),
    Metric("migrations", "CPU migrations", "migrations/msg", 1.0),
    Metric("threads_wait_s", "threads waiting for a CPU (run delay)", "µs/msg", 1e6),
    Metric("cpus_user_s", "its CPUs: user (all processes)", "µs/msg", 1e6),
    Metric("cpus_system_s", "its CPUs: system", "µs/msg", 1e6),
    Metric("cpus_softirq_s", "its CPUs: softirq (the network stack's receive)", "µs/msg", 1e6),
    Metric("cpus_irq_s", "its CPUs: hard irq", "µs/msg", 1e6),
    Metric("cpus_steal_s", "its CPUs: stolen by the hypervisor", "µs/msg", 1e6),
    Metric("cpus_idle_s", "its CPUs: idle", "µs/msg", 1e6),
    Metric("tcp_retransmits", "TCP segments retransmitted", "per million msgs", 1e6),
    Metric("tcp_listen_overflows", "listen queue overflows", "per million msgs", 1e6),
    Metric("tcp_listen_drops", "listen queue drops", "per million msgs", 1e6),
    Metric("tcp_drops", "TCP receive-path drops (backlog, rcvq, zero window, ofo)", "per million msgs", 1e6),
    Metric("tcp_resets", "TCP resets sent", "per million msgs", 1e6),
    Metric("cycles", "CPU cycles (hardware counter)", "cycles/msg", 1.0),
    Metric("instructions", "instructions retired (hardware counter)", "instructions/msg", 1.0),
    Metric("energy_uj", "energy (RAPL packages)", "µJ/msg", 1.0),
)
METRIC_NAMES: tuple[str, ...] = tuple(m.name for m in METRICS)
_BY_NAME = {m.name: m for m in METRICS}
_TCP_DROPS = ("TCPBacklogDrop", "TCPRcvQDrop", "TCPZeroWindowDrop", "TCPOFODrop")


@dataclass(frozen=True)
class Cost:
    """One side's metric over the measure phase: the counter's delta and per message, or why not."""

    side: str
    metric: str
    value: float | None
    per_message: float | None
    unavailable: str | None = None

    def to_row(self) -> dict[str, Any]:
        return {
            "side": self.side,
            "metric": self.metric,
            "value": self.value,
            "per_message": self.per_message,
            "unavailable": self.unavailable,
        }


def is_unavailable(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(UNAVAILABLE)


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _raw(side: Mapping[str, Any]) -> dict[str, float | str | None]:
    """A side's counters as one value (or an unavailable string) per metric."""
    out: dict[str, float | str | None] = {}
    proc = side.get("process_cpu_s")
    for key, name in (("user", "cpu_user_s"), ("sys", "cpu_sys_s")):
        out[name] = proc if is_unavailable(proc) else _num((proc or {}).get(key))
    for name in ("syscalls", "migrations", "cycles", "instructions"):
        value = side.get(name)
        out[name] = value if is_unavailable(value) else _num(value)
    switches = side.get("context_switches") or {}
    out["ctx_voluntary"] = _num(switches.get("voluntary"))
    out["ctx_involuntary"] = _num(switches.get("involuntary"))
    waits = [_num(t.get("wait_s")) for t in side.get("threads") or [] if isinstance(t, Mapping)]
    out["threads_wait_s"] = math.fsum(w for w in waits if w is not None) if waits else None
    cpus = side.get("cpu_time_s")
    for kind in ("user", "system", "softirq", "irq", "steal", "idle"):
        out[f"cpus_{kind}_s"] = cpus if is_unavailable(cpus) else _num((cpus or {}).get(kind))
    tcp = side.get("tcp")
    if is_unavailable(tcp):
        for name in (
            "tcp_retransmits",
            "tcp_listen_overflows",
            "tcp_listen_drops",
            "tcp_drops",
            "tcp_resets",
        ):
            out[name] = tcp
    elif isinstance(tcp, Mapping):
        out["tcp_retransmits"] = _num(tcp.get("RetransSegs"))
        out["tcp_listen_overflows"] = _num(tcp.get("ListenOverflows"))
        out["tcp_listen_drops"] = _num(tcp.get("ListenDrops"))
        drops = [_num(tcp.get(k)) for k in _TCP_DROPS if k in tcp]
        out["tcp_drops"] = math.fsum(d for d in drops if d is not None) if drops else None
        out["tcp_resets"] = _num(tcp.get("OutRsts"))
    energy = side.get("energy_uj")
    if is_unavailable(energy):
        out["energy_uj"] = energy
    elif isinstance(energy, Mapping):
        # Packages only (zone `intel-rapl:0`, keyed `intel-rapl:0:package-0`; not its subzones
        # `intel-rapl:0:0`, nor the MMIO interface's copy of the package): they hold the rest.
        pkgs = [_num(v) for k, v in energy.items() if str(k).count(":") == 2 and "mmio" not in str(k)]
        out["energy_uj"] = math.fsum(v for v in pkgs if v is not None) if pkgs else None
    return out


def messages_of(side: Mapping[str, Any], throughput: float | None, key: str = "interval_s") -> float | None:
    """The messages a side's reading interval held: the run's throughput times that interval (``key``: the
    system calls' own, ``syscalls_interval_s``, between the binary's two reports of its count)."""
    interval = _num(side.get(key))
    if throughput is None or interval is None or interval <= 0 or throughput <= 0:
        return None
    return throughput * interval


def teardown_in_reading(side: Mapping[str, Any], cooldown_s: float | None) -> str | None:
    """Why a side's end reading may hold the client's teardown, or None: the reading came ``lag_s[1]``
    after the client's stamp of the measure phase's end, later than its load ended (``cooldown_s`` after
    that stamp; then it closes every connection, and over loopback each close with an echo in flight is
    a reset in the namespace's counters: a run with no cooldown read one reset per connection)."""
    lags = side.get("lag_s")
    lag = _num(lags[1]) if isinstance(lags, Sequence) and len(lags) >= 2 else None
    if cooldown_s is None or lag is None or lag <= cooldown_s:
        return None
    return (
        f"{UNAVAILABLE}the end reading came {lag * 1e3:.1f} ms after the measure phase, after the client's "
        f"load ended (cooldown {cooldown_s:g} s): its connections' teardown resets may be in the count"
    )


#: Sums over the threads alive at the end reading (``costs.<side>.threads``): a thread that ended before
#: it took its counts with it (:func:`ended_threads`).
THREAD_SUMS: frozenset[str] = frozenset({"ctx_voluntary", "ctx_involuntary", "migrations", "threads_wait_s"})


def ended_threads(side: Mapping[str, Any]) -> str | None:
    """Why a side's sums over its threads are short, or None: ``threads_ended`` of them ended before the
    end reading (a client with no cooldown: its workers are gone when the launcher reads, and its context
    switches were those of its main thread alone)."""
    ended = side.get("threads_ended")
    if isinstance(ended, bool) or not isinstance(ended, int) or ended <= 0:
        return None
    return (
        f"{UNAVAILABLE}{ended} of its threads ended before the end reading (with no cooldown, the "
        "client's workers): a sum over its threads would miss theirs"
    )


#: What the client's teardown adds to a reading taken after it (:func:`teardown_in_reading`).
TEARDOWN_METRICS: frozenset[str] = frozenset({"tcp_resets"})


def run_costs(
    costs: Mapping[str, Any] | None, throughput: float | None, cooldown_s: float | None = None
) -> list[Cost]:
    """Every side's every metric (CONTRACTS.md §6, ``run_costs``) from a record's ``costs`` and its
    throughput; ``[]`` for a run without ``costs`` (collection off, or a record from before it).
    ``cooldown_s`` (the record's ``phases``): a side read after the client's load ended has its
    :data:`TEARDOWN_METRICS` unavailable (:func:`teardown_in_reading`); a side some of whose threads
    ended before the end reading, its :data:`THREAD_SUMS` (:func:`ended_threads`)."""
    if not isinstance(costs, Mapping):
        return []
    out: list[Cost] = []
    for side_name in SIDES:
        side = costs.get(side_name)
        if side is None:
            continue
        if is_unavailable(side) or not isinstance(side, Mapping):
            why = side if isinstance(side, str) else f"{UNAVAILABLE}not recorded"
            out += [Cost(side_name, m.name, None, None, why) for m in METRICS]
            continue
        msgs = messages_of(side, throughput)
        # The binaries' own counts of system calls are read at their own instants (CONTRACTS.md §5): over
        # those; a record from before them, or without the interval, over the side's readings.
        syscall_msgs = messages_of(side, throughput, "syscalls_interval_s") or msgs
        raw = _raw(side)
        late = teardown_in_reading(side, _num(cooldown_s))
        short = ended_threads(side)
        for m in METRICS:
            value = raw.get(m.name)
            if late is not None and m.name in TEARDOWN_METRICS and not isinstance(value, str):
                value = late
            if short is not None and m.name in THREAD_SUMS and not isinstance(value, str):
                value = short
            if isinstance(value, str):
                out.append(Cost(side_name, m.name, None, None, value))
            elif value is None:
                out.append(Cost(side_name, m.name, None, None, f"{UNAVAILABLE}not in this record"))
            else:
                denominator = syscall_msgs if m.name == "syscalls" else msgs
                per = value / denominator * m.scale if denominator else None
                out.append(Cost(side_name, m.name, value, per))
    return out


def metric(name: str) -> Metric:
    return _BY_NAME[name]


def why_rows(costs: Sequence[Cost]) -> list[dict[str, Any]]:
    """The Run page's "why" table: per metric, each side's cost per message (or why not), in
    :data:`METRICS` order, with the metric's label and unit."""
    by: dict[tuple[str, str], Cost] = {(c.metric, c.side): c for c in costs}
    rows = []
    for m in METRICS:
        if not any((m.name, s) in by for s in SIDES):
            continue
        row: dict[str, Any] = {"metric": m.name, "label": m.label, "unit": m.unit}
        for s in SIDES:
            c = by.get((m.name, s))
            row[s] = None if c is None else c.per_message
            row[f"{s}_total"] = None if c is None else c.value
            row[f"{s}_unavailable"] = None if c is None else c.unavailable
        rows.append(row)
    return rows


#: A thread's columns in :func:`thread_rows` (per message of the run), with the record's key and scale.
THREAD_COLUMNS: tuple[tuple[str, str, float], ...] = (
    ("syscalls", "syscalls", 1.0),
    ("voluntary", "voluntary", 1.0),
    ("involuntary", "involuntary", 1.0),
    ("migrations", "migrations", 1.0),
    ("on_cpu_us", "run_s", 1e6),
    ("waiting_us", "wait_s", 1e6),
)


def thread_rows(costs: Mapping[str, Any] | None, throughput: float | None) -> list[dict[str, Any]]:
    """Each thread alive at the measure phase's end (the record's ``costs.<side>.threads``), its events
    per message *of the run* (every thread's divided by the same messages: which thread blocks, makes the
    calls, waits for a CPU): ``side, tid, comm, cpus, new`` and :data:`THREAD_COLUMNS` (None: not read, or
    no messages). System calls over the binary's own interval, the rest over the side's readings', as
    :func:`run_costs`. Server first, then client; in the record's order within a side."""
    if not isinstance(costs, Mapping):
        return []
    out: list[dict[str, Any]] = []
    for side_name in SIDES:
        side = costs.get(side_name)
        if not isinstance(side, Mapping):
            continue
        msgs = messages_of(side, throughput)
        syscall_msgs = messages_of(side, throughput, "syscalls_interval_s") or msgs
        for t in side.get("threads") or []:
            if not isinstance(t, Mapping):
                continue
            row: dict[str, Any] = {
                "side": side_name,
                "tid": t.get("tid"),
                "comm": t.get("comm"),
                "cpus": t.get("cpus"),
                "new": bool(t.get("new")),
            }
            for column, key, scale in THREAD_COLUMNS:
                value = _num(t.get(key))
                over = syscall_msgs if key == "syscalls" else msgs
                row[column] = value / over * scale if value is not None and over else None
            out.append(row)
    return out
