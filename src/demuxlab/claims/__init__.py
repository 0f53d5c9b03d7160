"""The seeds' claims as data, a verdict for each from an experiment's measured points, and a recommendation
of the best design per workload (seeds 000–004).

The package is split by concern. Its pure part takes and returns plain values (no database, no files), so
the report, the dashboard and the tests call the same code:

==============================  ========================================================================
module                          what
==============================  ========================================================================
``claims.inputs``               the typed inputs (:class:`MeasuredPoint`, :class:`ModelPrediction`) from
                                plain rows, each field checked
``claims.estimates``            means with intervals (:class:`Est`), their comparisons and formats
``claims.context``              what a test sees (:class:`Context`) and returns (:class:`Part`), the
                                :class:`Claim` entry, the shared selection helpers
``claims.seed000`` … ``004``    each seed's claims with their tests
``claims.catalog``              :data:`CLAIMS`, every seed's claims in report order
``claims.evaluation``           :func:`evaluate_claims`: a :class:`ClaimVerdict` per claim and host
``claims.recommendation``       :func:`recommend`: the best design per host and workload
``claims.markdown``             ``claims.md``'s text from verdicts and recommendations
==============================  ========================================================================

Two thin outer modules do the I/O: :mod:`demuxlab.claims.db` reads the rows from the database;
:mod:`demuxlab.claims.report` writes ``claims.csv``, ``recommendations.csv`` and ``claims.md``.

Input shape
===========

``points``: one mapping (or :class:`MeasuredPoint`) per measured point, its repeats already summarized:

=================  ========  ==========================================================================
key                type      meaning
=================  ========  ==========================================================================
pattern            str       a name of :data:`demuxlab.vocab.PATTERNS` (``hsha``, ``lf``, ``reactor``, …)
notifier           str       a name of :data:`demuxlab.vocab.NOTIFIERS` (``select``, ``epoll-et``, …)
threads            int       every thread of the pattern (HSHA counts its monitor)
work_us            float     busy-wait work per message
connections        int
msg_size           int       bytes
mean               float     throughput, messages/s, mean over the runs
ci_low, ci_high    float     95 % confidence interval of the mean; None with one run (no interval)
n                  int       successful runs
rate               float     optional: open-loop total rate (msg/s); None or absent = closed loop
client_threads     int       optional
host               str       optional: the server host ("" if unknown); claims compare points of one host
server_cpus        int       optional: CPUs the server was pinned to; points with more threads than that
                             are oversubscribed and left out of thread-scaling tests (None = unknown, kept)
cost_us            float     optional: server CPU time per message (µs), mean over the runs (seed 004)
cost_ci_low/high   float     optional: its 95 % confidence interval
point_key          str       optional, for the evidence
runs_flagged       int       optional: runs a validity check failed (in the mean, named in the evidence)
flags              str       optional: ``check:n`` per failing check, space-separated (points.csv's
                             ``flags``, CONTRACTS.md §7; :func:`demuxlab.validity.point_flags`)
=================  ========  ==========================================================================

``predictions`` (optional): one mapping per model prediction of a point: ``pattern, notifier, threads,
work_us, connections`` (+ ``msg_size``, ``rate`` if known: they must then equal the point's), ``source``
(``calibration`` or ``paper``), ``mean`` (predicted msg/s) and ``ci_halfwidth_rel`` (None = exact).

``facts`` (optional): host name → topology facts (``docs/CONTRACTS.md`` §3); only ``cores``,
``numa_nodes`` and ``cpu_model`` are read, to name the hardware in the evidence.

Verdicts
========

Two measured means are compared by the platform's one decision (:func:`demuxlab.stats.difference`): A
beats B when A's mean is higher and Welch's t-test of their runs says they differ (p < 0.05; the standard
deviations come back from the intervals and the runs); when it does not (tied), or a point has a single run
and so no interval, the comparison is undecided. A model's prediction, which has no runs, is compared by
the intervals. A claim is ``holds`` or ``refuted`` when the data decide it, ``inconclusive`` when they
cannot,
and ``not testable`` when the experiment lacks the points (pattern or notifier not in the spec, a workload
outside the claim's scope, too few thread counts, or too few server CPUs for the thread counts). A claim
tested over several groups (workloads, notifiers) is refuted if any group refutes it, holds if every
testable group holds, and is inconclusive otherwise. Adding a claim is one :class:`Claim` entry in its
seed's module (``claims.seed00N.CLAIMS``) with a test function over a :class:`Context`.
"""

from __future__ import annotations

from demuxlab.claims.catalog import CLAIMS
from demuxlab.claims.context import Claim, Context, Part, combine
from demuxlab.claims.estimates import Est, above, fmt_est, fmt_rate, fmt_ratio, ratio
from demuxlab.claims.evaluation import ClaimVerdict, evaluate_claims, hardware_of
from demuxlab.claims.inputs import MeasuredPoint, ModelPrediction, Workload, as_point, as_prediction
from demuxlab.claims.recommendation import Recommendation, recommend
from demuxlab.vocab import HOLDS, INCONCLUSIVE, NOT_TESTABLE, REFUTED, VERDICTS

__all__ = [
    "CLAIMS",
    "HOLDS",
    "INCONCLUSIVE",
    "NOT_TESTABLE",
    "REFUTED",
    "VERDICTS",
    "Claim",
    "ClaimVerdict",
    "Context",
    "Est",
    "MeasuredPoint",
    "ModelPrediction",
    "Part",
    "Recommendation",
    "Workload",
    "above",
    "as_point",
    "as_prediction",
    "combine",
    "evaluate_claims",
    "fmt_est",
    "fmt_rate",
    "fmt_ratio",
    "hardware_of",
    "ratio",
    "recommend",
]
