"""What a Slurm job learns of each of its nodes: one job step on both nodes runs this module, which prints
one JSON line per node (``python -m demuxlab.slurm.agent [--noise] [--cache DIR]``):

``{"host": NAME, "facts": {...}, "noise": {...} | null, "cpus": "0-15"}``

* ``facts``: :func:`demuxlab.topology.collect_facts` on the node, restricted to the CPUs this job may use
  there (the step's affinity: an exclusive job gets the whole node, a container only its CPU set), so that
  the planner pins inside them;
* ``noise``: the same look at the node as the remote launcher's pre-run check
  (:data:`demuxlab.launch.remote.NOISE_SCRIPT`: governor, load, other containers, heavy processes);
* ``--cache DIR``: the facts are also kept per node by their digest, ``DIR/<node>/<sha256>.json`` (written
  once per digest; ingest stores them in ``hosts`` by the same digest, and the Slurm report lists which
  facts each node had);
* ``--out DIR``: the line is also written to ``DIR/<node>.json``, which the job reads: the two tasks' lines
  on the step's one stdout can interleave, and then neither parses.

Only the standard library, :mod:`demuxlab.topology` and :mod:`demuxlab.jsonio` are imported unless
``--noise`` is given.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

from demuxlab.errors import ConfigError
from demuxlab.jsonio import write_json_atomic


def stable_digest(facts: dict[str, Any]) -> str:
    """The facts' identity without their volatile parts (the hosts table's ``facts_sha256`` rule)."""
    stable = {k: v for k, v in facts.items() if k not in ("collected_at", "load")}
    text = json.dumps(stable, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def node_facts() -> dict[str, Any]:
    from demuxlab.topology import collect_facts, format_cpu_list

    facts = collect_facts()
    allowed = sorted(os.sched_getaffinity(0))
    online = facts.get("online_cpus") or []
    if allowed and set(allowed) != set(online):
        keep = set(allowed)
        facts["online_cpus"] = [c for c in online if c in keep]
        facts["cpus"] = [row for row in facts.get("cpus") or [] if row.get("cpu") in keep]
        facts["allowed_cpus"] = format_cpu_list(allowed)
    return facts


def noise_sample() -> dict[str, Any]:
    from demuxlab.launch.remote import NOISE_SCRIPT

    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            exec(compile(NOISE_SCRIPT, "<noise check>", "exec"), {"__name__": "__noise__"})
        doc = json.loads(buf.getvalue().strip().splitlines()[-1])
    except Exception as exc:  # the check is best effort; the run records why it has none
        return {"error": f"noise check failed: {type(exc).__name__}: {exc}"}
    return doc if isinstance(doc, dict) else {"error": "noise check printed no object"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m demuxlab.slurm.agent")
    ap.add_argument("--noise", action="store_true", help="Also sample the node's noise.")
    ap.add_argument("--cache", type=Path, help="Keep the facts per node by digest under this folder.")
    ap.add_argument(
        "--out", type=Path, help="Also write the line to <folder>/<node>.json (shared filesystem)."
    )
    args = ap.parse_args(argv)
    facts = node_facts()
    host = str(facts.get("hostname") or os.uname().nodename)
    if args.cache is not None:
        path = args.cache / host / f"{stable_digest(facts)}.json"
        if not path.exists():
            with contextlib.suppress(OSError, ConfigError):
                path.parent.mkdir(parents=True, exist_ok=True)
                write_json_atomic(path, facts)
    doc = {
        "host": host,
        "facts": facts,
        "noise": noise_sample() if args.noise else None,
        "cpus": facts.get("allowed_cpus"),
    }
    if args.out is not None:
        # A file per node: two tasks' lines on the step's one stdout can interleave (seen under load).
        write_json_atomic(args.out / f"{host}.json", doc, indent=None)
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
