"""demuxlab's benchmarks, studies and fuzzers, by purpose (run them with ``python -m bench``):

- ``bench/perf/``: how fast the platform's parts are (servers, client, launchers, ingest, bundles,
  dashboard, workflow, testbed, CTMC solvers);
- ``bench/fidelity/``: how well the models and the measurements agree (CTMC validation and the studies
  around it, the adaptive replay), with the specs they sweep (``specs/``) and the lent host's script
  (``device16.sh``);
- ``bench/fuzz/``: hostile inputs and what demuxlab makes of them;
- ``bench/peers/``: the servers practitioners would write themselves (libuv, tokio), measured beside ours;
- ``bench/data/``: the result archives the studies replay (``ctmc/``, ``adaptive/``);
- ``bench/common/``: what the benchmarks share (their command line, running a pinned pair, scratch
  databases).

A benchmark is a module of ``perf``, ``fidelity``, ``fuzz`` or ``peers`` with a top-level ``main(argv)``;
``python -m bench`` lists them and ``python -m bench NAME [OPTIONS]`` runs one (``make bench``,
``make bench B=NAME ARGS="..."``), see :mod:`bench.harness`. Run from the repository root (``-m`` puts it
on ``sys.path``); this package imports only the standard library.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent  # the checkout the benchmarks belong to
