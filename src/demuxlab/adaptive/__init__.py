"""Adaptive sweeps (issue 20, docs/adaptive.md): the same figure and the same verdicts for less machine time.

An experiment opts in with an ``adaptive:`` block (:mod:`demuxlab.spec.adaptive`: its settings, checks and
coarse design). Three mechanisms, each on or off:

* **sequential repeats**: a point stops repeating once its 95 % interval is within a relative target
  after a minimum number of runs (Georges et al. 2007; Kalibera & Jones 2013), in rounds whose run order
  is randomized;
* **runs that end when steady**: a run stops once its per-second samples are stationary with a tight
  within-run interval (:mod:`demuxlab.steady`, used live by the launchers);
* **model-guided points**: a coarse design first, then the points where the answer can change (peaks,
  crossings, model misses), guided by the CTMC models where they describe a point and by the
  measurements elsewhere.

The package is split by concern; the pure modules take and return plain values:

============================  ==========================================================================
module                        what
============================  ==========================================================================
``adaptive.runs``             pure: :class:`Observed` (a finished run) from a run record; a run cut where
                              it became steady; a point's summary
``adaptive.guide``            pure: the model of each curve that guides the points (CTMC shape scaled to
                              the data, or the data interpolated), its misses
``adaptive.answer``           pure: the claims' verdicts and the best design per workload of the
                              measured points (:mod:`demuxlab.claims`)
``adaptive.policy``           pure: :func:`next_round`, the runs of the next round and why
``adaptive.models``           the CTMC models' predictions from the sweep's calibration runs, through the
                              validation stages' pure interfaces
``adaptive.replay``           the policy over recorded runs, the full design beside it (the benchmark)
``adaptive.text``             the replay's table
``adaptive.experiment``       pure: an adaptive experiment round by round over its own run records
                              (``demuxlab adaptive next``), and its decisions once it stops
``adaptive.records``          the files: a folder of run records
============================  ==========================================================================
"""

from __future__ import annotations

from demuxlab.adaptive.answer import Answer, MeasuredRow, answer
from demuxlab.adaptive.policy import Design, Request, Round, design_of, next_round
from demuxlab.adaptive.runs import Observed, observe, stopped_when_steady

__all__ = [
    "Answer",
    "Design",
    "MeasuredRow",
    "Observed",
    "Request",
    "Round",
    "answer",
    "design_of",
    "next_round",
    "observe",
    "stopped_when_steady",
]
