"""Warming the dashboard at server start, so that the first page a researcher opens answers as fast as the
ones after it (issue 45: 2.4–3.6 s to the first graph, most of it first-use work, not the page's own).

What a first request would otherwise pay, each a step of :func:`warm`, in this order:

- ``imports``: the libraries the pages import on first use (scipy's statistics for the intervals and the
  one decision, its sparse solver for the what-if's exact answer, the claims and the refusals' store);
- ``model kernels``: every modelled pattern's chains compiled, or loaded from the kernel cache
  (:func:`demuxlab.ctmc.engine.compile_structure`; a chain whose code changed compiles for 7–33 s);
- ``what-if``: each pattern's first what-if curve at its fewest threads (the exact solver and the fluid,
  through the what-if's own cache);
- ``server thread ranges``: ``demux-server --list`` (:func:`demuxlab.designs.valid_pairs`, cached per
  binary) and each pattern's range on the what-if;
- ``plans``: every stored experiment's plan (:func:`demuxlab.dashboard.data.plans.plan`, cached per spec),
  which the Experiments page, the first page, computes for every row.

A warm-up is an optimisation: a step that fails is reported through ``log`` with its reason and the next
one runs; nothing here raises. :func:`demuxlab.dashboard.server.serve` runs it in a background thread
(pages answer meanwhile); the dashboard bench runs it before it times the pages.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable

Log = Callable[[str], object]


#: The modules the pages import on first use: the intervals and the one decision (scipy.stats: its first
#: import takes seconds), the what-if's exact solver, the models, Claims and recommendations, the stored
#: refusals every absent model line may need.
FIRST_USE_IMPORTS: tuple[str, ...] = (
    "scipy.stats",
    "scipy.sparse.linalg",
    "demuxlab.ctmc.predict",
    "demuxlab.claims",
    "demuxlab.validation.store",
)


def _imports() -> str:
    for name in FIRST_USE_IMPORTS:
        importlib.import_module(name)
    return f"{len(FIRST_USE_IMPORTS)} modules"


def _kernels() -> str:
    from demuxlab.ctmc.engine import compile_structure
    from demuxlab.ctmc.rates import structures
    from demuxlab.dashboard.whatif import model_patterns

    n = 0
    for pattern in model_patterns():
        for st in structures(pattern):
            compile_structure(st).warm()
            n += 1
    return f"{n} chains"


def _whatif() -> str:
    from demuxlab.ctmc.rates import min_threads, paper_rates
    from demuxlab.dashboard import whatif

    patterns = whatif.model_patterns()
    for pattern in patterns:
        whatif.quick_curve(pattern, paper_rates(pattern), [int(min_threads(pattern))], 5.0, 32)
    return f"{len(patterns)} patterns"


def _ranges() -> str:
    from demuxlab.dashboard import whatif
    from demuxlab.designs import valid_pairs

    pairs = valid_pairs()
    for pattern in whatif.model_patterns():
        whatif.max_threads(pattern)
    return f"{len(pairs)} pairs"


def _plans() -> str:
    from demuxlab.dashboard import common
    from demuxlab.dashboard.data import experiments
    from demuxlab.dashboard.data.plans import plan

    with common.store().connect() as conn:
        exps = experiments.experiments(conn)
    for e in exps.to_dict("records"):
        plan(e["name"], e["spec_sha256"], e["spec_text"])
    return f"{len(exps)} experiments"


#: (name, step) in the order :func:`warm` runs them; a step returns what it warmed, in a few words.
STEPS: tuple[tuple[str, Callable[[], str]], ...] = (
    ("imports", _imports),
    ("model kernels", _kernels),
    ("what-if", _whatif),
    ("server thread ranges", _ranges),
    ("plans", _plans),
)


def warm(log: Log) -> dict[str, float | None]:
    """Run every step of :data:`STEPS`, each reported through ``log`` as one line (``dashboard warm-up:
    model kernels: 24 chains in 3.1 s``, or ``…: failed: <reason>``); returns each step's seconds (None:
    it failed). Never raises."""
    took: dict[str, float | None] = {}
    t_all = time.perf_counter()
    for name, step in STEPS:
        t0 = time.perf_counter()
        try:
            what = step()
        except Exception as exc:  # a warm-up is an optimisation: report, go on
            took[name] = None
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            log(f"dashboard warm-up: {name}: failed: {reason}")
            continue
        took[name] = time.perf_counter() - t0
        log(f"dashboard warm-up: {name}: {what} in {took[name]:.1f} s")
    log(f"dashboard warm-up: done in {time.perf_counter() - t_all:.1f} s")
    return took
