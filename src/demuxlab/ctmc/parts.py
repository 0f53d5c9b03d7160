"""What the chains share: the rates of steps several patterns take (a closed-loop client, a notifier call, a
contended lock, a thread paired with a connection), the server's steps, and the calibrated chain's additions.

Each rate is an :class:`~demuxlab.ctmc.engine.Expr` (one expression over ``x`` and ``r``), so a chain that
uses one gets the same generated kernel, kernel cache and dependency analysis as if it had written the
expression out; these functions only write the expression, with the indices the chain passes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from demuxlab.ctmc.engine import (
    CACHE_SIZE,
    KZ,
    RE,
    RK,
    RN,
    RS,
    RU,
    RV,
    RZ,
    Expr,
    JumpFn,
    ModelStructure,
    Pool,
    RateFn,
    TransitionClass,
    mass,
    operand,
    total,
)

SERVER = "server"  # the processor-sharing pool of the server's threads: every chain has one
CLIENT_WAKE = "client_wake"  # the client's step that wakes a sleeping dispatcher (waking_client_steps)
KICK = "k"  # a kick pending: a re-arm wrote the eventfd of the dispatcher asleep in select/poll
SEND_WAKE = "send_wake"  # a server thread wakes the client its send found asleep (sending_wakes)
WAKER = "tw"  # a server thread whose send found the client asleep, waking it (sending_wakes)
CLIENT_WAKING = "zc"  # the client woken by a response, not yet running (waking_client_steps)
CLIENT_UP = "client_up"  # …and its step that runs it, after its latency 1/r_u


def closed_client(c0: int) -> Expr:
    """The closed-loop client: r_z · min(c0, k_z) (k_z messages turned around at once)."""
    return Expr(f"r[{RZ}] * cmin(x[{c0}], r[{KZ}])")


def waking_client(c0: int) -> Expr:
    """The closed-loop client whose request wakes a sleeping dispatcher: its turnaround 1/r_z plus the
    wake-up's ω = 1/r_v, (1/r_z + 1/r_v)⁻¹ · min(c0, k_z)."""
    return Expr(f"safe_div(1.0, 1.0 / r[{RZ}] + 1.0 / r[{RV}]) * cmin(x[{c0}], r[{KZ}])")


def paired(rate: int, connections: int, threads: int) -> Expr:
    """A step a thread takes with its connection: r · min(connections, threads)."""
    return Expr(f"r[{rate}] * cmin(x[{connections}], x[{threads}])")


def contended(rate: int, holders: Sequence[int], among: Sequence[int]) -> Expr:
    """A lock the populations ``among`` compete for, taken by the first of ``holders`` (the others: the lock
    free, the thread's own guards): r · Π holders / Σ among, 0 where no one competes (seed 001's
    lock-competition denominators)."""
    return Expr(f"safe_div({mass(rate, *holders).text}, {total(*among).text})")


def paper_notifier(batch: int) -> Expr:
    """Seed 001's notifier rate for a batch of x[batch] descriptors: r_e / batch (0 for an empty one)."""
    return Expr(f"safe_div(r[{RE}], x[{batch}])")


def notifier_call(batch: Expr) -> Expr:
    """The calibrated notifier call returning ``batch`` descriptors: 1 / (α + batch/r_e), α = 1/r_n."""
    return Expr(f"safe_div(1.0, 1.0 / r[{RN}] + {operand(batch, left=True)} / r[{RE}])")


def cached(*species: int) -> Expr:
    """What one notifier call returns of the ready populations: min(Σ species, the server's 64)."""
    return Expr(f"cmin({total(*species).text}, {CACHE_SIZE!r})")


def ring_batch(sends: Sequence[int], receives: int) -> Expr:
    """Completions one io_uring reap returns: the send completions first (he = min(Σ sends, 64)), then
    receive completions up to the 64: he + min(x[receives], 64 − he)."""
    he = cached(*sends).text
    return Expr(f"{he} + cmin(x[{receives}], {CACHE_SIZE!r} - {he})")


def awake(thread: int, *ready: int) -> Expr:
    """A thread that sleeps in the notifier while nothing is ready: x[thread] · H(Σ ready)."""
    return Expr(f"x[{thread}] * H({total(*ready).text})")


def asleep(thread: int, *ready: int) -> Expr:
    """A thread asleep in the notifier: x[thread] · (1 − H(Σ ready)) (:func:`awake`'s complement)."""
    return Expr(f"x[{thread}] * (1.0 - H({total(*ready).text}))")


def free(lock: int) -> Expr:
    """1 while a lock is free (its free population x[lock] is 1): a thread waiting for it is woken."""
    return Expr(f"x[{lock}]")


def waiting_for(thread: int, lock: int) -> Expr:
    """Threads in x[thread] waiting for a lock, as threads that want a CPU: all of them while it is free."""
    return Expr(f"x[{thread}]") * free(lock)


def one_per_item(idle: int, items: int) -> Expr:
    """Idle threads woken by queued items, one per item (a put signals one waiter): min(x[idle], x[items])."""
    return Expr(f"cmin(x[{idle}], x[{items}])")


def step(name: str, doc: str, rate: RateFn, jump: Mapping[str, int] | JumpFn) -> TransitionClass:
    """A step of a server thread: in the pool :data:`SERVER`."""
    return TransitionClass(name, doc, rate, jump, SERVER)


def client_step(species: Sequence[str], to: str) -> TransitionClass:
    """The client's step (not in the server's pool): c0 → ``to``, at :func:`closed_client`'s rate."""
    return TransitionClass(
        "client", "the client sends the next request", closed_client(species.index("c0")), {"c0": -1, to: 1}
    )


def waking_client_steps(
    species: Sequence[str], to: str, sleeper: int, ready: Sequence[int]
) -> tuple[TransitionClass, ...]:
    """The client's step of a chain whose dispatcher sleeps in its notifier (x[sleeper] while every
    x[ready] is 0): ``client`` at :func:`closed_client`'s rate while the dispatcher is awake,
    ``client_wake`` at :func:`waking_client`'s while the request wakes it (the sender pays the wake-up,
    ω = 1/r_v: docs/ctmc-reference.md, "The client that wakes the dispatcher"). With r_v unbounded (not
    measured) the two add up to :func:`client_step`'s one. The client sends nothing while a response that
    found it asleep is waking it (x[:data:`CLIENT_WAKING`] = 1, set by the chain's send as it sets the
    sender's :data:`WAKER`: :func:`sending_wakes`), until ``client_up`` runs it after its latency 1/r_u
    (fitted from the client's sleeps; 1 ns where they were not measured: docs/ctmc-reference.md, "The send
    that wakes the client")."""
    c0 = species.index("c0")
    zc = species.index(CLIENT_WAKING)
    sleeping = asleep(sleeper, *ready)
    jump = {"c0": -1, to: 1}
    doc = "the client sends the next request"
    running = Expr(f"1.0 - x[{zc}]")
    return (
        TransitionClass("client", doc, closed_client(c0) * Expr(f"1.0 - {sleeping.text}") * running, jump),
        TransitionClass(
            CLIENT_WAKE, f"{doc}, which wakes the dispatcher", waking_client(c0) * sleeping * running, jump
        ),
        TransitionClass(
            CLIENT_UP, "the client woken by a response runs", Expr(f"r[{RU}] * x[{zc}]"), {CLIENT_WAKING: -1}
        ),
    )


def woken_client_steps(species: Sequence[str], to: str) -> tuple[TransitionClass, TransitionClass]:
    """The client's step of a chain whose sends wake it (:func:`sending_wakes`) but whose client wakes no
    dispatcher of the chain's (tpc: each request wakes its own thread, at every setting, which the client's
    turnaround r_z holds; LF: charging the leader's wake-up as the reactor's made the held-out error worse,
    docs/ctmc.md "Generalisation"): ``client`` at :func:`closed_client`'s rate while the client is not being
    woken (x[:data:`CLIENT_WAKING`] = 0), and ``client_up`` that runs it after its latency 1/r_u."""
    c0 = species.index("c0")
    zc = species.index(CLIENT_WAKING)
    return (
        TransitionClass(
            "client",
            "the client sends the next request",
            closed_client(c0) * Expr(f"1.0 - x[{zc}]"),
            {"c0": -1, to: 1},
        ),
        TransitionClass(
            CLIENT_UP, "the client woken by a response runs", Expr(f"r[{RU}] * x[{zc}]"), {CLIENT_WAKING: -1}
        ),
    )


def sending_wakes(species: Sequence[str], then: str) -> TransitionClass:
    """``send_wake``: a server thread whose send found the client asleep wakes it, ω = 1/r_s of its CPU
    (the client's ω, r_v, at the server's share; docs/ctmc-reference.md, "The send that wakes the client"),
    then goes on to ``then``. The chain's send jumps the sender to :data:`WAKER` instead of ``then``, and the
    client to :data:`CLIENT_WAKING`, where the client had no message before it (x[c0] = 0: ``d[then] =
    H(x[c0])``, ``d[waker] = d[zc] = 1 − H(x[c0])``; a jump of its own in each chain, since a generated
    kernel calls a chain's jump functions and nothing they call). The client's station turns min(c0, k_z)
    messages around: with k_z = 1 (its threads on one CPU, as on the 2-core host) it sleeps exactly while
    c0 = 0; with more, its idle threads at 0 < c0 < k_z are not charged. Where the client's sleeps were
    not fitted (r_u instant) the step takes 1 ns."""
    return step(
        SEND_WAKE,
        "the send found the client asleep: the sender wakes it",
        mass(RS, species.index(WAKER)),
        {WAKER: -1, then: 1},
    )


def kicking_steps(
    species: Sequence[str],
    name: str,
    doc: str,
    rate: int,
    holders: Sequence[int],
    jump: Mapping[str, int],
    sleeper: int,
    ready: int,
) -> tuple[TransitionClass, TransitionClass]:
    """A handler's re-arm (``name``: ``rate`` times the ``holders``, the re-arming thread and the lock it
    holds) in a chain whose dispatcher waits in select or poll, which cannot see a descriptor re-armed
    after the call began: a re-arm made while the dispatcher sleeps in its call (x[sleeper], nothing in
    x[ready], no kick pending) writes its eventfd (``<name>_kick``: κ = 1/r_k on top of the re-arm, and a
    kick pending, :data:`KICK`), which wakes it to call again (the server's ``kick_locked``;
    docs/ctmc-reference.md, "The re-arm's kick"). A dispatcher already woken, by a request or a kick, is not
    kicked in the chain: kicking it there too (while it is in its call at all, as the server's flag says) made
    the chain kick 2.5× as often as the server did (0.68 against 0.27 kicks per message) and call 1.7× as
    often; kicking only a sleeper gives the server's counts. With r_k = 0 in the parameter vector (not
    measured: epoll, or runs that predate the ``kick`` timing) the kick step never fires and ``name`` is the
    re-arm as it was."""
    k = species.index(KICK)
    on = f"safe_div(r[{RK}], r[{RK}])"  # 1 where the kick is measured, 0 where r_k is 0 (not H: r_k < 1)
    kicks = Expr(f"{on} * {asleep(sleeper, ready, k).text}")
    with_kick = Expr(f"safe_div(1.0, 1.0 / r[{rate}] + safe_div(1.0, r[{RK}]))")
    return (
        TransitionClass(name, doc, mass(rate, *holders) * Expr(f"1.0 - {kicks.text}"), jump, SERVER),
        TransitionClass(
            f"{name}_kick",
            f"{doc}, and kicks the dispatcher asleep in its notifier",
            mass(with_kick, *holders) * kicks,
            {**jump, KICK: 1},
            SERVER,
        ),
    )


def calibrated(
    paper: ModelStructure,
    name: str,
    species: tuple[str, ...],
    runnable: RateFn,
    changed: Sequence[TransitionClass],
    added: Sequence[TransitionClass],
    calls: str | None = None,
) -> ModelStructure:
    """A paper chain's calibrated chain (HSHA's, LF's FULL): more ``species``, the transitions ``changed``
    (by name) in place of the paper's, the ``added`` ones after them, the server pool's new ``runnable``;
    ``calls``, the transition that fires once per notifier call, where it is not the paper chain's."""
    by_name = {tr.name: tr for tr in changed}
    return ModelStructure(
        name=name,
        species=species,
        throughput=paper.throughput,
        calls=calls or paper.calls,
        events_per_message=paper.events_per_message,
        pools=(Pool(SERVER, runnable),),
        transitions=(*(by_name.get(tr.name, tr) for tr in paper.transitions), *added),
    )
