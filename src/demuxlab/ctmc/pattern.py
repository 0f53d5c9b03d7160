"""What a pattern's model is, in one record (:class:`PatternModel`): its chains, how its threads are read
from the server's JSON for a calibration (:class:`OpRole`), the rates its chain has no step for, and its
hooks. Each ``ctmc/<pattern>.py`` declares its ``MODEL``; :mod:`demuxlab.ctmc.registry` lists them, and
``rates.py`` (the chains it builds) and the calibration (``calibrate.py`` and its ``fit_*`` modules)
dispatch through it. The thread range a server takes is not here: it is the binary's
(``demux-server --list``, :mod:`demuxlab.designs`); the record says only what its chain needs (one thread
per role, or exactly one thread).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from demuxlab.ctmc.engine import FloatArray, ModelStructure
from demuxlab.errors import DemuxlabError


@dataclass(frozen=True)
class OpRole:
    """Threads of one kind, as a calibration reads them (calibrate.py's fit, steps 1–3): their
    ``threads_detail`` role names, the timed operations they do per message (each mapped to the rate it
    sets), whether they call the notifier, where their untimed CPU goes (``r_x``: per message, they handle
    messages; ``r_n``: per notifier call, they only dispatch) and whether they do the work."""

    names: tuple[str, ...]
    ops: tuple[tuple[str, str], ...]
    notifies: bool
    overhead: str
    works: bool

    def __post_init__(self) -> None:
        if not self.names:
            raise DemuxlabError("pattern model: a role needs a threads_detail role name")
        if self.overhead not in ("r_x", "r_n"):
            raise DemuxlabError(f"pattern model: role {self.names[0]}: overhead must be r_x or r_n")


# (threads, connections, full) -> the chain's initial state
Initial = Callable[[int, int, bool], FloatArray]


@dataclass(frozen=True)
class PatternModel:
    """One pattern's model.

    - ``chain``: its chain with seed 001's rates (HSHA, LF: the printed model, deviations fixed);
      ``full``: the chain calibrated rates drive, where it differs (HSHA's and LF's ``FULL``);
      ``scheduled``: its run-to-block chain for more threads than cores (sched.py), if it has roles of
      several kinds; ``inline``: the model of its one-thread case where that thread does every role's part
      (uring-shared at T = 1 is uring's chain of one ring); ``initial``: the initial state.
    - ``roles``: the calibration's roles, the one that calls the notifier first (``calibrate.py``); the
      calibration concurrency is one thread per role (seed 001 §V-A: the lowest that runs every role).
    - ``tagged``: T independent threads, the chain one of them with its N/T connections (the others in the
      pool's load); ``one_thread``: the chain is of exactly one thread (the reactor); ``slots``: ``--threads``
      counts CPU slots, each ``threads_detail`` entry summing the connection threads that ran in it, which
      block in ``recv`` (tpc).
    - ``instant``: rates its chain has no step for, or whose operation runs in the kernel, and why;
      ``timed_since``: rates whose operation a server timed only from some version on (runs without the
      timing leave them instant, with the reason); ``handoff``: the lock a chain hands to a sleeping waiter
      at r_h (uring-shared), if any; ``peek_only``: the timed notifier call only reads a ready count, so r_e
      is not judged against the paper's; ``waiting_dispatcher``: seed 001's HSHA r_e (2.9 µs, a dispatcher
      that always waits and is woken) instead of LF's (0.635 µs).
    - ``inline_rates``: what the one-thread case's rates become (uring-shared: the re-submission's CPU is
      the thread's own again).
    """

    pattern: str
    chain: ModelStructure
    initial: Initial
    roles: tuple[OpRole, ...]
    full: ModelStructure | None = None
    scheduled: ModelStructure | None = None
    inline: PatternModel | None = None
    inline_rates: Callable[[Any], Any] | None = None
    tagged: bool = False
    one_thread: bool = False
    slots: bool = False
    instant: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)
    timed_since: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)
    handoff: str | None = None
    peek_only: bool = False
    waiting_dispatcher: bool = False

    def __post_init__(self) -> None:
        if not self.roles:
            raise DemuxlabError(f"pattern model {self.pattern}: needs at least one role")
        if any(r.notifies for r in self.roles[1:]):
            raise DemuxlabError(f"pattern model {self.pattern}: only the first role may call the notifier")
        if sum(r.works for r in self.roles) != 1:
            raise DemuxlabError(f"pattern model {self.pattern}: exactly one role does the work")

    @property
    def calibration_threads(self) -> int:
        """The concurrency of its calibration runs: one thread per role (HSHA's monitor and one worker)."""
        return len(self.roles)

    @property
    def min_threads(self) -> int:
        """The fewest threads its chains describe: one per role, or one where the inline case exists."""
        return 1 if self.inline is not None else len(self.roles)

    @property
    def max_threads(self) -> int | None:
        """The most: 1 for a chain of exactly one thread, else no bound of the model's own."""
        return 1 if self.one_thread else None

    @property
    def notifies(self) -> bool:
        return self.roles[0].notifies

    def role_names(self) -> set[str]:
        return {n for r in self.roles for n in r.names}

    def structure(
        self, threads: int | None = None, full: bool = False, scheduled: bool = False
    ) -> ModelStructure:
        """The chain at ``threads`` (the inline case's at one thread), ``full``: the calibrated chain,
        ``scheduled``: the run-to-block one where the pattern has it."""
        if self.inline is not None and threads == 1:
            return self.inline.structure(1, full=full)
        if scheduled and self.scheduled is not None:
            return self.scheduled
        return self.full if full and self.full is not None else self.chain

    def structures(self) -> tuple[ModelStructure, ...]:
        """Every chain the pattern may use (to compile them ahead)."""
        out: list[ModelStructure] = [self.inline.chain] if self.inline is not None else []
        for st in (self.chain, self.full, self.scheduled):
            if st is not None and st not in out:
                out.append(st)
        return tuple(out)

    def initial_state(self, threads: int, connections: int, full: bool) -> FloatArray:
        if self.inline is not None and threads == 1:
            return self.inline.initial(1, connections, full)
        return self.initial(threads, connections, full)
