"""Run to block: the kernel's scheduler in a chain whose threads outnumber its cores (issue 19).

Processor sharing (engine.Pool without holders) gives each of R runnable threads C/R of the C cores at
once. Linux does not: a thread that has a core keeps it until it blocks (its slice, milliseconds, is far
longer than a message's microseconds), and a thread that is woken waits for one. Measured on one core
(HSHA/select, 128 connections, docs/ctmc-reference.md): the monitor, woken when a connection is ready, waited
7.8, 16 and 35 µs per call for the CPU at 2, 3 and 4 threads, while its workers drained the queue; its batches
grew and its calls per message fell 0.55 → 0.31 → 0.18. A processor-sharing chain keeps making about the
same number of calls per message at every thread count, and so charges the monitor's per-call cost at
every one of them (−25 % at 3 threads).

:func:`scheduled` makes a chain's threads take cores that way. Each *role* (threads of one kind: HSHA's
monitor, its workers) is a pool with a population of **holders**, its threads that hold a core; its
runnable count includes a woken thread that does not run yet (the monitor once a connection is ready, an
idle worker once an item is queued for it, a thread whose lock came free). Its threads run at
min(holders, runnable)/runnable each (engine.held): the holders spread over the role's runnable threads.
Three kinds of transitions move the cores:

======================  ===============================================================  ================
transition              rate                                                             jump
======================  ===============================================================  ================
``grant:<role>``        γ · w_r · min(F, W) / W · H(F)                                   holders_r + 1
``release:<role>``      γ · (holders_r − min(holders_r, R_r))                            holders_r − 1
``wake:<d>:<other>``    r_w · w_d · (1 − H(F)) · holders_o / (Σ_{q≠d} holders_q) / (R − 1)  d + 1, o − 1
======================  ===============================================================  ================

R_r the role's runnable count, w_r = R_r − min(holders_r, R_r) its threads waiting for a core, W = Σ w_r,
F = cores − Σ holders the free cores, R = Σ R_r. A free core goes to a waiting thread (γ = 10 per µs:
the switch's latency; its CPU is already in the calibrated per-message and per-call costs); a holder
whose role has fewer runnable threads than holders blocked and gives its core back; and a woken
dispatcher (d: the first role, the one that calls the notifier) preempts a thread of another role after
r_w⁻¹ × (the other runnable threads) µs on average: EEVDF lets a woken thread in once the others have run
their fair turn, so its wait grows with them. Only the dispatcher preempts. A handler it woke (a queued
item) waits for a free core, which comes within the dispatcher's few µs of dispatching; and a thread it
preempted waits for the core to come free, as under Linux, where a preempted thread does not take the core
back from the one that preempted it. With every role preempting, as this chain first had it, a preempted
handler took the core straight back at the same rate: at two threads on one core the pair swapped the core
every 1/r_w µs, processor sharing again, and the dispatcher waited 13.2 µs per call even with a 0.1 µs
wake-up against the server's 7.7 µs, so the fit was refused (docs/ctmc-reference.md, "Only the dispatcher
preempts"). r_w (``Rates.r_w``) is fitted where the calibration runs themselves had more threads than
cores: the dispatching role's measured wait for a CPU per notifier call (``threads_detail[].wait_s``) is
matched by the chain's own (calibrate.notifier_in_chain). Within a role the holders are spread evenly, as
processor sharing would; threads of one kind preempting each other change nothing a population chain can
see.

With a core per thread nothing here is used (rates.build uses the chain as it is); with r_w unknown (a
calibration on enough cores, the paper's rates) an oversubscribed prediction keeps processor sharing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from demuxlab.ctmc.engine import CORES, RW, Expr, ModelStructure, Pool, TransitionClass
from demuxlab.errors import DemuxlabError

GRANT_RATE = 10.0  # per µs: a free core goes to a waiting thread within 0.1 µs on average
RELEASE_RATE = 10.0  # per µs: a thread that blocked gives its core back


@dataclass(frozen=True)
class Role:
    """Threads of one kind in a chain: which of them want a CPU in a state (``runnable``, woken threads
    included) and the transitions they take (``steps``, by name)."""

    name: str
    runnable: Expr
    steps: tuple[str, ...]


def holders_of(role: str) -> str:
    """The population counting ``role``'s threads that hold a core."""
    return f"cpu_{role}"


def scheduled(st: ModelStructure, roles: Sequence[Role]) -> ModelStructure:
    """``st`` with its threads taking cores by run to block (the module's table): every transition of
    ``st``'s server pool belongs to exactly one role and moves to that role's pool; the other transitions
    (the client's) stay as they are."""
    if len(roles) < 2:
        raise DemuxlabError(f"model {st.name}: run to block needs two roles or more, got {len(roles)}")
    role_of: dict[str, str] = {}
    for role in roles:
        for name in role.steps:
            st.transition_index(name)
            if name in role_of:
                raise DemuxlabError(
                    f"model {st.name}: step {name} is in roles {role_of[name]} and {role.name}"
                )
            role_of[name] = role.name
    for tr in st.transitions:
        if tr.pool is not None and tr.name not in role_of:
            raise DemuxlabError(f"model {st.name}: step {tr.name} of pool {tr.pool} is in no role")
        if tr.pool is None and tr.name in role_of:
            raise DemuxlabError(f"model {st.name}: step {tr.name} is in a role but needs no CPU")
    base = len(st.species)
    index = {role.name: base + i for i, role in enumerate(roles)}
    runnable = {role.name: f"({role.runnable.text})" for role in roles}
    held = {name: f"x[{i}]" for name, i in index.items()}
    waiting = {name: f"({runnable[name]} - cmin({held[name]}, {runnable[name]}))" for name in index}
    free = f"(r[{CORES}] - ({' + '.join(held.values())}))"
    all_waiting = f"({' + '.join(waiting.values())})"
    others = f"({' + '.join(runnable.values())} - 1.0)"
    added: list[TransitionClass] = []
    for role in roles:
        name, cpu = role.name, holders_of(role.name)
        added.append(
            TransitionClass(
                f"grant:{name}",
                f"a free core goes to a waiting {name}",
                Expr(
                    f"{GRANT_RATE!r} * safe_div({waiting[name]} * cmin({free}, {all_waiting}), {all_waiting})"
                    f" * H({free})"
                ),
                {cpu: 1},
            )
        )
        added.append(
            TransitionClass(
                f"release:{name}",
                f"a {name} that blocked gives its core back",
                Expr(f"{RELEASE_RATE!r} * ({held[name]} - cmin({held[name]}, {runnable[name]}))"),
                {cpu: -1},
            )
        )
    dispatcher = roles[0].name
    rest = " + ".join(held[o.name] for o in roles if o.name != dispatcher)
    for other in roles[1:]:
        added.append(
            TransitionClass(
                f"wake:{dispatcher}:{other.name}",
                f"a woken {dispatcher} preempts a {other.name}",
                Expr(
                    f"r[{RW}] * {waiting[dispatcher]} * (1.0 - H({free})) * "
                    f"safe_div({held[other.name]}, ({rest}) * {others})"
                ),
                {holders_of(dispatcher): 1, holders_of(other.name): -1},
            )
        )
    moved = tuple(
        TransitionClass(tr.name, tr.doc, tr.rate, tr.jump, role_of.get(tr.name)) for tr in st.transitions
    )
    return ModelStructure(
        name=f"{st.name}-scheduled",
        species=(*st.species, *(holders_of(role.name) for role in roles)),
        transitions=(*moved, *added),
        throughput=st.throughput,
        pools=tuple(Pool(role.name, role.runnable, holders=index[role.name]) for role in roles),
        calls=st.calls,
        events_per_message=st.events_per_message,
    )
