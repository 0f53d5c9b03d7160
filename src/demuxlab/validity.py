"""Is a run's measurement valid? Checks with a verdict and a reason (issue 44), per run from its record, and
per experiment the order the runs went in.

Per run (:func:`run_checks`; the ``run_checks`` table, docs/CONTRACTS.md §6):

* ``independence``: the per-second samples (after the trimmed transient) are independent: Spearman's
  rank correlation of each sample with the next (Lancet's lag test, ATC'19), two-sided p < 0.01 fails;
  fewer than :data:`MIN_LAG_SAMPLES` samples: unknown.
* ``stationarity``: the run's own steady-state check (:func:`demuxlab.stats.steady_state`, the record's
  ``stats``): a significant drift beyond 2 % fails.
* ``arrivals`` (open loop only): the schedule's gaps fit an exponential: chi-square over the client's 16
  equiprobable bins (``gap_bins``); fails when p < 0.001 *and* a bin's share is more than 10 % off its
  expected 1/16 (a million gaps make a negligible deviation significant; a hundred make a large one not).
* ``placement.core``, ``placement.cache``, ``placement.numa``: server and client (on one host) share a
  physical core (fails), the last-level cache or a NUMA node (fails where the host had another to give,
  warns where it has only one); ``placement.irq``: a side's CPU takes a NIC's interrupts (fails on two
  hosts; warns on one, where the loopback traffic raises none).
* ``cpu.governor`` (not ``performance`` fails), ``cpu.frequency`` (a CPU's frequency at the measure phase's
  end differs from its start by more than 5 %: fails), ``cpu.turbo`` (on: warns): from the record's
  ``costs``, else (a side's costs did not or could not read it) the host's facts, the reason saying so;
  where neither can say: unknown, with its reason.
* ``network``: TCP retransmits, listen overflows or drops in a side's namespace during the measure phase
  (warns: the namespace's counters include other traffic).

A run with a ``fail`` is *flagged* (``runs.flagged``): never hidden, counted in points.csv and named by the
claims. Per experiment, :func:`order_effect`: each run's throughput relative to its point's mean against
the order the runs started in (OrderSage, ATC'23): Spearman's correlation, p < 0.01 *and* a fitted trend
beyond 2 % across the experiment fails.

Pure: plain values in, :class:`Check` values out.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from demuxlab.costs import is_unavailable
from demuxlab.stats import DRIFT_LIMIT_REL
from demuxlab.vocab import CHECK_FAIL, CHECK_PASS, CHECK_UNKNOWN, CHECK_WARN, CHECKS

#: Independence: a lag test needs this many samples (5 pairs) to mean anything.
MIN_LAG_SAMPLES = 6
LAG_ALPHA = 0.01
#: Arrivals: chi-square's p below this and a bin this far from its share fail.
GAP_ALPHA = 0.001
GAP_DEVIATION = 0.10
MIN_GAPS = 80  # 5 expected per bin
GAP_BINS = 16
#: Frequency: moved by more than this between the measure phase's start and end.
FREQ_MOVE_REL = 0.05
#: Order effect: a trend across the experiment larger than this, and significant.
ORDER_ALPHA = 0.01
ORDER_TREND_REL = 0.02
MIN_ORDER_RUNS = 10


@dataclass(frozen=True)
class Check:
    check: str
    verdict: str
    reason: str
    value: float | None = None  # the statistic the verdict read (rho, p, a share, …), as the reason says

    def to_row(self) -> dict[str, Any]:
        return {"check": self.check, "verdict": self.verdict, "reason": self.reason, "value": self.value}


def flagged(checks: Iterable[Check]) -> bool:
    return any(c.verdict == CHECK_FAIL for c in checks)


#: How a point's ``flags`` joins its ``check:n`` items (docs/CONTRACTS.md §7, points.csv).
FLAGS_SEP = " "


def point_flags(failed: Iterable[Collection[str]]) -> dict[str, Any]:
    """A point's flagged runs from the checks each of its runs failed: ``runs_flagged`` (the runs a check
    failed) and ``flags``, ``check:n`` per failing check in the order of :data:`~demuxlab.vocab.CHECKS`,
    space-separated (docs/CONTRACTS.md §7): one format for points.csv and the claims' inputs."""
    runs = [set(f) for f in failed]
    counts = {c: sum(1 for f in runs if c in f) for c in CHECKS}
    return {
        "runs_flagged": sum(1 for f in runs if f),
        "flags": FLAGS_SEP.join(f"{c}:{n}" for c, n in counts.items() if n),
    }


# -- statistics --------------------------------------------------------------------------------------------


def _ranks(xs: Sequence[float]) -> list[float]:
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    ranks = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def _pearson(a: Sequence[float], b: Sequence[float]) -> float | None:
    n = len(a)
    ma, mb = math.fsum(a) / n, math.fsum(b) / n
    sab = math.fsum((x - ma) * (y - mb) for x, y in zip(a, b, strict=True))
    saa = math.fsum((x - ma) ** 2 for x in a)
    sbb = math.fsum((y - mb) ** 2 for y in b)
    if saa == 0 or sbb == 0:
        return None
    return sab / math.sqrt(saa * sbb)


def spearman(a: Sequence[float], b: Sequence[float]) -> tuple[float | None, float | None]:
    """Spearman's rho and its two-sided p (the t approximation, as ``scipy.stats.spearmanr``); None where
    a side is constant."""
    rho = _pearson(_ranks(a), _ranks(b))
    n = len(a)
    if rho is None or n < 3:
        return rho, None
    if abs(rho) >= 1.0:
        return rho, 0.0
    from scipy.special import stdtr

    t = rho * math.sqrt((n - 2) / (1.0 - rho * rho))
    return rho, float(2.0 * stdtr(n - 2, -abs(t)))


def chi_square_uniform(counts: Sequence[int]) -> tuple[float, float]:
    """Pearson's chi-square statistic of ``counts`` against equal expected counts, and its p."""
    from scipy.special import chdtrc

    n = sum(counts)
    e = n / len(counts)
    stat = math.fsum((c - e) ** 2 / e for c in counts)
    return stat, float(chdtrc(len(counts) - 1, stat))


# -- per run -----------------------------------------------------------------------------------------------


def independence(per_second: Sequence[float], trimmed: int = 0) -> Check:
    kept = [float(x) for x in per_second[trimmed:]]
    if len(kept) < MIN_LAG_SAMPLES:
        return Check(
            "independence",
            CHECK_UNKNOWN,
            f"{len(kept)} per-second samples: a lag test needs at least {MIN_LAG_SAMPLES}",
        )
    rho, p = spearman(kept[:-1], kept[1:])
    if rho is None or p is None:
        return Check("independence", CHECK_PASS, "the samples are constant: nothing carries over", 0.0)
    said = f"lag-1 Spearman rho {rho:+.2f} over {len(kept) - 1} pairs, p {p:.3g}"
    if p < LAG_ALPHA:
        return Check(
            "independence",
            CHECK_FAIL,
            f"{said}: each second's throughput follows the one before it (the samples are not "
            "independent: the run's interval is narrower than it should be)",
            rho,
        )
    return Check("independence", CHECK_PASS, f"{said}: no dependence between consecutive seconds", rho)


def stationarity(stats: Mapping[str, Any] | None) -> Check:
    stats = stats or {}
    stationary, drift = stats.get("stationary"), stats.get("drift_rel")
    shown = f"{drift:+.1%}" if isinstance(drift, int | float) else "unknown"
    if stationary is True:  # steady_state fails a drift only beyond 2 % *and* significant: say which held
        known = isinstance(drift, int | float)
        why = "within 2 %" if known else "not significant"
        if known and abs(float(drift or 0)) > DRIFT_LIMIT_REL:
            why = "beyond 2 % but not significant (the slope's p ≥ 0.01: too few or noisy seconds to tell)"
        return Check("stationarity", CHECK_PASS, f"drift {shown} across the window: {why}", drift)
    if stationary is False:
        return Check(
            "stationarity",
            CHECK_FAIL,
            f"throughput drifts by {shown} across the measure phase (significant, beyond 2 %)",
            drift,
        )
    return Check("stationarity", CHECK_UNKNOWN, "fewer than 3 samples after the transient: no trend test")


def arrivals(client: Mapping[str, Any] | None) -> Check | None:
    """None for a closed loop (there is no schedule)."""
    client = client or {}
    if client.get("mode") != "open":
        return None
    bins = client.get("gap_bins")
    if not isinstance(bins, list) or len(bins) != GAP_BINS:
        return Check(
            "arrivals", CHECK_UNKNOWN, "no gap_bins in the client's report (a client before 2026-12)"
        )
    n = sum(int(b) for b in bins)
    if n < MIN_GAPS:
        return Check("arrivals", CHECK_UNKNOWN, f"{n} gaps: a fit needs at least {MIN_GAPS} (5 per bin)")
    stat, p = chi_square_uniform([int(b) for b in bins])
    worst = max(range(GAP_BINS), key=lambda j: abs(bins[j] * GAP_BINS / n - 1.0))
    dev = bins[worst] * GAP_BINS / n - 1.0
    said = (
        f"chi-square {stat:.1f} over {GAP_BINS} equiprobable bins of {n} gaps, p {p:.3g}; "
        f"the farthest bin ({worst + 1} of {GAP_BINS}) holds {dev:+.1%} of its share"
    )
    if p < GAP_ALPHA and abs(dev) > GAP_DEVIATION:
        return Check("arrivals", CHECK_FAIL, f"{said}: the gaps are not exponential (not Poisson)", p)
    return Check("arrivals", CHECK_PASS, f"{said}: exponential gaps, a Poisson schedule", p)


def _cpu_rows(facts: Mapping[str, Any] | None) -> dict[int, Mapping[str, Any]]:
    rows = (facts or {}).get("cpus") or []
    return {int(r["cpu"]): r for r in rows if isinstance(r, Mapping) and isinstance(r.get("cpu"), int)}


def _llc(facts: Mapping[str, Any] | None) -> list[set[int]] | None:
    caches = [
        c
        for c in (facts or {}).get("caches") or []
        if isinstance(c, Mapping) and c.get("type") != "Instruction"
    ]
    if not caches:
        return None
    top = max(int(c.get("level") or 0) for c in caches)
    return [set(c.get("cpus") or []) for c in caches if int(c.get("level") or 0) == top]


def _sides(record: Mapping[str, Any]) -> tuple[list[int], list[int], bool, Mapping[str, Any] | None]:
    pinning = record.get("pinning") or {}
    hosts = record.get("hosts") or {}
    server, client = hosts.get("server"), hosts.get("client")
    same = pinning.get("same_host")
    if same is None:
        same = bool(server and client and server.get("hostname") == client.get("hostname"))
    return list(pinning.get("server_cpus") or []), list(pinning.get("client_cpus") or []), bool(same), server


def _shared(name: str, what: str, a: Sequence[int], b: Sequence[int], groups: Mapping[int, Any]) -> Check:
    """Whether CPU lists ``a`` (server) and ``b`` (client) meet in a group (``groups``: CPU → group)."""
    ga = {groups[c] for c in a if c in groups}
    gb = {groups[c] for c in b if c in groups}
    both = sorted(ga & gb, key=str)
    if not both:
        return Check(name, CHECK_PASS, f"server and client on different {what}s")
    pairs = [f"{s}/{c}" for s in a for c in b if s in groups and c in groups and groups[s] == groups[c]]
    ever = {g for g in groups.values()}
    cpus = f"server/client CPUs {', '.join(pairs[:6])}"
    if name == "placement.core":
        return Check(
            name, CHECK_FAIL, f"server and client share a physical core ({cpus}): they compete for it", 1.0
        )
    if len(ever) < 2:
        return Check(
            name,
            CHECK_WARN,
            f"server and client share the host's only {what} ({cpus}): unavoidable here",
            1.0,
        )
    return Check(
        name, CHECK_FAIL, f"server and client share a {what} ({cpus}) though the host has {len(ever)}", 1.0
    )


def placement(record: Mapping[str, Any]) -> list[Check]:
    server_cpus, client_cpus, same_host, facts = _sides(record)
    names = ("placement.core", "placement.cache", "placement.numa")
    if not same_host:
        return [Check(n, CHECK_PASS, "server and client on two hosts") for n in names]
    if not server_cpus or not client_cpus:
        return [Check(n, CHECK_UNKNOWN, "a side is not pinned: the scheduler places it") for n in names]
    rows = _cpu_rows(facts)
    out = []
    cores = {c: r["core"] for c, r in rows.items() if r.get("core") is not None}
    out.append(
        _shared("placement.core", "physical core", server_cpus, client_cpus, cores)
        if cores
        else Check("placement.core", CHECK_UNKNOWN, "the host's facts do not say which CPUs share a core")
    )
    llc = _llc(facts)
    if llc is None:
        out.append(Check("placement.cache", CHECK_UNKNOWN, "the host's facts list no caches"))
    else:
        group = {cpu: i for i, cpus in enumerate(llc) for cpu in cpus}
        out.append(_shared("placement.cache", "last-level cache", server_cpus, client_cpus, group))
    nodes = {c: r["node"] for c, r in rows.items() if r.get("node") is not None}
    out.append(
        _shared("placement.numa", "NUMA node", server_cpus, client_cpus, nodes)
        if nodes
        else Check("placement.numa", CHECK_UNKNOWN, "the host's facts do not give the CPUs' NUMA nodes")
    )
    return out


def irq_placement(record: Mapping[str, Any]) -> Check:
    server_cpus, client_cpus, same_host, _ = _sides(record)
    hosts = record.get("hosts") or {}
    hits: list[str] = []
    unknown = []
    for role, cpus in (("server", server_cpus), ("client", client_cpus)):
        facts = hosts.get(role) or {}
        nics = facts.get("nics")
        if nics is None:
            unknown.append(role)
            continue
        online = set(facts.get("online_cpus") or [])
        for nic in nics:
            for irq in nic.get("irqs") or []:
                cpus_of = irq.get("effective_cpus") or irq.get("cpus")
                if not cpus_of or (online and set(cpus_of) >= online):
                    continue  # unknown or allowed everywhere: cannot be avoided, nothing to say
                for c in sorted(set(cpus_of) & set(cpus)):
                    hits.append(f"{role} CPU {c} takes {nic.get('name')}'s IRQ {irq.get('irq')}")
    if hits:
        verdict = CHECK_WARN if same_host else CHECK_FAIL
        why = "; loopback traffic raises none of them" if same_host else ""
        return Check("placement.irq", verdict, "; ".join(hits[:4]) + why, float(len(hits)))
    if unknown:
        return Check("placement.irq", CHECK_UNKNOWN, f"no NIC facts for the {' and '.join(unknown)} host")
    return Check("placement.irq", CHECK_PASS, "no side's CPU takes a NIC's pinned interrupts")


def _side_values(record: Mapping[str, Any], key: str) -> list[tuple[str, Any, str]]:
    """Per side (the server's alone on one host): ``key``'s value, from the run's ``costs`` where they
    read it, else from the side's host facts (the record's ``hosts``), else the costs' ``unavailable:
    why``; and where it came from (``""``: the costs; else a note naming the host's facts and what the
    costs said)."""
    costs = record.get("costs") or {}
    out = []
    _, _, same_host, _ = _sides(record)
    for role in ("server",) if same_host else ("server", "client"):
        side = costs.get(role)
        measured = side.get(key) if isinstance(side, Mapping) else side if is_unavailable(side) else None
        fact = ((record.get("hosts") or {}).get(role) or {}).get(key)
        if (measured is None or is_unavailable(measured)) and fact is not None and not is_unavailable(fact):
            said = (
                f"the run's costs: {measured}" if measured is not None else "the run's costs did not read it"
            )
            out.append((role, fact, f"{role}: from the host's facts; {said}"))
        else:
            out.append((role, measured, ""))
    return out


def _sources(values: Sequence[tuple[str, Any, str]]) -> str:
    """`` (where: …)`` for the values that came from the host's facts, else nothing."""
    notes = [n for _, _, n in values if n]
    return f" ({'; '.join(notes)})" if notes else ""


def governor(record: Mapping[str, Any]) -> Check:
    values = _side_values(record, "governor")
    bad = [
        (r, v) for r, v, _ in values if isinstance(v, str) and not is_unavailable(v) and v != "performance"
    ]
    if bad:
        said = "; ".join(f"{r}: {v}" for r, v in bad)
        return Check(
            "cpu.governor",
            CHECK_FAIL,
            f"governor {said}, not performance: the frequency follows the load{_sources(values)}",
        )
    if values and all(v == "performance" for _, v, _ in values):
        return Check("cpu.governor", CHECK_PASS, f"governor performance{_sources(values)}")
    why = next((v for _, v, _ in values if is_unavailable(v)), None)
    return Check("cpu.governor", CHECK_UNKNOWN, str(why or "the governor was not read"))


def frequency(record: Mapping[str, Any]) -> Check:
    worst: tuple[float, str] | None = None
    why = None
    for role, value, _ in _side_values(record, "frequency_khz"):
        if not isinstance(value, Mapping) or "start" not in value:
            why = why or (value if is_unavailable(value) else None)
            continue
        for cpu, start in (value.get("start") or {}).items():
            end = (value.get("end") or {}).get(cpu)
            if not isinstance(start, int | float) or not isinstance(end, int | float) or start <= 0:
                continue
            move = (end - start) / start
            if worst is None or abs(move) > abs(worst[0]):
                worst = (move, f"{role} CPU {cpu}: {start / 1e3:.0f} → {end / 1e3:.0f} MHz")
    if worst is None:
        return Check("cpu.frequency", CHECK_UNKNOWN, str(why or "no frequency read"))
    said = f"largest change between the measure phase's start and end: {worst[1]} ({worst[0]:+.1%})"
    if abs(worst[0]) > FREQ_MOVE_REL:
        return Check("cpu.frequency", CHECK_FAIL, f"{said}: the frequency moved during the run", worst[0])
    return Check("cpu.frequency", CHECK_PASS, said, worst[0])


def turbo(record: Mapping[str, Any]) -> Check:
    values = _side_values(record, "turbo")
    on = [r for r, v, _ in values if v is True]
    if on:
        return Check(
            "cpu.turbo",
            CHECK_WARN,
            f"turbo boost on ({', '.join(on)}): the frequency depends on the load and heat{_sources(values)}",
        )
    if values and all(v is False for _, v, _ in values):
        return Check("cpu.turbo", CHECK_PASS, f"turbo boost off{_sources(values)}")
    why = next((v for _, v, _ in values if is_unavailable(v)), None)
    return Check("cpu.turbo", CHECK_UNKNOWN, str(why or "turbo state not read"))


def network(record: Mapping[str, Any]) -> Check | None:
    costs = record.get("costs") or {}
    sides = [(r, costs.get(r)) for r in ("server", "client")]
    if costs.get("same_netns"):
        sides = sides[:1]
    counts: dict[str, int] = defaultdict(int)
    seen = False
    for _, side in sides:
        tcp = side.get("tcp") if isinstance(side, Mapping) else None
        if not isinstance(tcp, Mapping):
            continue
        seen = True
        for key in ("RetransSegs", "ListenOverflows", "ListenDrops", "TCPBacklogDrop", "TCPRcvQDrop"):
            if isinstance(tcp.get(key), int):
                counts[key] += tcp[key]
    if not seen:
        return None
    hits = {k: v for k, v in counts.items() if v > 0}
    if hits:
        said = ", ".join(f"{k} {v}" for k, v in sorted(hits.items()))
        return Check(
            "network",
            CHECK_WARN,
            f"during the measure phase: {said} (the namespace's counters: other traffic counts too)",
            float(sum(hits.values())),
        )
    return Check(
        "network", CHECK_PASS, "no retransmit, listen overflow or drop during the measure phase", 0.0
    )


def run_checks(record: Mapping[str, Any]) -> list[Check]:
    """Every check of one run record (a failed run: none; its failure is its verdict)."""
    if record.get("status") != "ok":
        return []
    client = record.get("client") or {}
    stats = record.get("stats") or {}
    out = [
        independence(client.get("per_second") or [], int(stats.get("trimmed_seconds") or 0)),
        stationarity(stats),
    ]
    a = arrivals(client)
    if a is not None:
        out.append(a)
    out += placement(record)
    out.append(irq_placement(record))
    out += [governor(record), frequency(record), turbo(record)]
    n = network(record)
    if n is not None:
        out.append(n)
    return out


# -- per experiment ----------------------------------------------------------------------------------------


def order_effect(runs: Sequence[tuple[str, float, float]]) -> Check:
    """``runs``: (the point and class a run belongs to, when it started (any increasing number), its
    throughput), every ok run of an experiment. Each run's throughput relative to its point's mean
    (points with two runs or more) against its place in the order the runs started."""
    groups: dict[str, list[float]] = defaultdict(list)
    for key, _, tput in runs:
        groups[key].append(tput)
    means = {k: math.fsum(v) / len(v) for k, v in groups.items() if len(v) >= 2}
    rows = sorted((t, tput / means[k] - 1.0) for k, t, tput in runs if k in means and means[k] > 0)
    if len(rows) < MIN_ORDER_RUNS:
        return Check(
            "order",
            CHECK_UNKNOWN,
            f"{len(rows)} runs at points with repeats: an order test needs at least {MIN_ORDER_RUNS}",
        )
    order = [float(i) for i in range(len(rows))]
    resid = [r for _, r in rows]
    rho, p = spearman(order, resid)
    n = len(rows)
    mo = (n - 1) / 2.0
    slope = math.fsum((i - mo) * r for i, r in zip(order, resid, strict=True)) / math.fsum(
        (i - mo) ** 2 for i in order
    )
    trend = slope * (n - 1)
    if rho is None or p is None:
        return Check("order", CHECK_PASS, f"{n} runs: every run at its point's mean", 0.0)
    said = (
        f"{n} runs: Spearman rho {rho:+.2f} between run order and throughput relative to the point's mean, "
        f"p {p:.3g}; fitted trend {trend:+.1%} from the first run to the last"
    )
    if p < ORDER_ALPHA and abs(trend) > ORDER_TREND_REL:
        return Check("order", CHECK_FAIL, f"{said}: the result depends on when a run went", trend)
    return Check("order", CHECK_PASS, f"{said}: no order effect", trend)
