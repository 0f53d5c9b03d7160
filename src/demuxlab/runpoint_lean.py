"""``demuxlab-run TICKET``: the one entry point of the workflow's run jobs (local, cluster, Slurm).

The plan wrote the run's ticket (:mod:`demuxlab.ticket`: point, repeat, phases, launcher, pinned class,
the spec's SHA-256). This command reads it, hashes the spec file against it (a spec edited since the plan
refuses the run in one line naming the ticket and the digests), and runs it where its options say
(:func:`demuxlab.runpoint.run_ticket`): on this host (``--server-facts``, ``--pair``), on a free healthy
pair of an inventory (``--pairs-from``) or on the two nodes of this Slurm job (``--slurm``). A failed
attempt before the last is kept under ``failures/`` and exits 1 (the workflow retries it).

Why a second console script beside ``demuxlab``: a sweep pays every run job's start-up on its controller
(64 pairs of 60 s runs: the run processes' start-ups were over half of the controller's two CPUs when each
loaded the spec, its YAML, schema and ``demux-server --list``, and imported numpy and click). So this one
parses with argparse and imports no click, PyYAML, jsonschema, numpy, scipy or the spec package
(``tests/unit/test_ticket.py`` checks the modules a whole run loads); the launchers compute a record's
statistics lazily, only from a real run's per-second throughput. ``demuxlab run-point`` stays the way in
for people: it builds the ticket from a spec and runs it through the same path.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from demuxlab.errors import ConfigError, DemuxlabError

if TYPE_CHECKING:
    from demuxlab.runpoint import RunPointRequest


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="demuxlab-run", description="One run of the plan: its ticket (results/<experiment>/tickets/)."
    )
    ap.add_argument("ticket", type=Path, help="The run's ticket (demuxlab plan --tickets).")
    ap.add_argument("--out", type=Path, required=True, help="Where the run record goes.")
    ap.add_argument("--launcher", help="native | docker (here, --slurm), remote | sim (--pairs-from).")
    ap.add_argument("--attempt", type=int, default=1)
    ap.add_argument("--max-attempts", type=int, default=1)
    ap.add_argument("--stall-timeout", type=float, default=5.0)
    ap.add_argument("--instrument", action="store_true")
    ap.add_argument("--git-rev", help="The checkout's revision as the workflow's controller started.")
    ap.add_argument("--noise-wait", type=float, default=60.0)
    ap.add_argument("--quarantine-after", type=int, default=3)
    here = ap.add_argument_group("on this host (the default)")
    here.add_argument("--server-facts", type=Path, help="Server host facts (else collected).")
    here.add_argument("--client-facts", type=Path, help="Client host facts (else the server's).")
    here.add_argument("--pair", default="local", help="Host pair name (its lease).")
    here.add_argument("--lease-wait", type=float, help="Seconds to wait for the pair (default: a run's).")
    cluster = ap.add_argument_group("a cluster of host pairs")
    cluster.add_argument("--pairs-from", help="Inventory or simulated cluster file.")
    cluster.add_argument("--cluster-state", type=Path, default=Path("results/cluster"))
    cluster.add_argument("--lane", type=int, default=0)
    cluster.add_argument("--pair-wait", type=float, default=3600.0)
    slurm = ap.add_argument_group("inside a Slurm job (the slurm profile)")
    slurm.add_argument("--slurm", action="store_true", help="Run on the two nodes of this Slurm job.")
    slurm.add_argument("--slurm-state", type=Path, default=Path("results/slurm"))
    slurm.add_argument("--stage", choices=("shared", "sbcast"), default="shared")
    slurm.add_argument("--drain", choices=("auto", "never"), default="auto")
    slurm.add_argument("--class-features", default="", help="Node features naming hardware classes.")
    slurm.add_argument("--slurm-group", default=None, help="The run's group (K runs of a lane, one job).")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _main(args)
    except DemuxlabError as exc:
        print(f"demuxlab: error: {exc.message}", file=sys.stderr)
        return exc.exit_code


def request_of(args: argparse.Namespace) -> RunPointRequest:
    """The options as one :class:`demuxlab.runpoint.RunPointRequest`."""
    from demuxlab.runpoint import RunPointRequest

    if args.attempt < 1 or args.max_attempts < 1:
        raise ConfigError(f"--attempt {args.attempt} / --max-attempts {args.max_attempts}: both count from 1")
    cluster = slurm = None
    if args.slurm:
        from demuxlab.slurm.job import JobOptions

        slurm = JobOptions(
            state=args.slurm_state,
            launcher=args.launcher or "native",
            stage=args.stage,
            drain=args.drain,
            quarantine_after=args.quarantine_after,
            noise_wait_s=args.noise_wait,
            out=args.out,
            attempt=args.attempt,
            max_attempts=args.max_attempts,
            class_features=tuple(f for f in args.class_features.split(",") if f),
            group=args.slurm_group,
        )
    elif args.pairs_from:
        from demuxlab.cluster.run import ClusterOptions

        cluster = ClusterOptions(
            pairs_from=args.pairs_from,
            state=args.cluster_state,
            launcher=args.launcher or "remote",
            lane=args.lane,
            quarantine_after=args.quarantine_after,
            pair_wait_s=args.pair_wait,
            noise_wait_s=args.noise_wait,
        )
    return RunPointRequest(
        out=args.out,
        server_facts=args.server_facts,
        client_facts=args.client_facts,
        launcher=args.launcher,
        host_pair=args.pair,
        attempt=args.attempt,
        max_attempts=args.max_attempts,
        instrument=args.instrument,
        stall_timeout_s=args.stall_timeout,
        lease_wait_s=args.lease_wait,
        git_rev=args.git_rev,
        cluster=cluster,
        slurm=slurm,
    )


def _main(args: argparse.Namespace) -> int:
    from demuxlab.runpoint import run_ticket
    from demuxlab.ticket import read_ticket

    req = request_of(args)
    ticket = read_ticket(args.ticket)
    result = run_ticket(ticket, req)
    print(result.message, file=sys.stderr)
    return 1 if result.retry else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
