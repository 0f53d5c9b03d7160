"""The ``demuxlab`` command line.

Subcommands live next to the code they drive and are imported lazily, so that ``demuxlab --help`` and the
thin commands the Snakemake rules call do not pay for importing scipy, numba or SQLAlchemy.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from demuxlab.errors import DemuxlabError

# name -> "module:attribute" of a click.Command or click.Group
_COMMANDS: dict[str, tuple[str, str]] = {
    "validate": ("demuxlab.commands", "validate"),
    "artifacts": ("demuxlab.commands", "artifacts"),
    "plan": ("demuxlab.commands", "plan"),
    "facts": ("demuxlab.commands", "facts"),
    "pairs": ("demuxlab.commands", "pairs"),
    "run-point": ("demuxlab.commands", "run_point"),
    "ingest": ("demuxlab.commands", "ingest"),
    "report": ("demuxlab.commands", "report"),
    "db": ("demuxlab.db.cli", "db"),
    "model": ("demuxlab.ctmc.cli", "model"),
    "claims": ("demuxlab.claims.report", "claims"),
    "bundle": ("demuxlab.bundle.cli", "bundle"),
    "cluster": ("demuxlab.cluster.cli", "cluster"),
    "slurm": ("demuxlab.slurm.cli", "slurm"),
    "hosts": ("demuxlab.hosts", "hosts"),
    "testbed": ("demuxlab.hosts", "testbed"),
    "dashboard": ("demuxlab.dashboard.cli", "dashboard"),
}

_HELP: dict[str, str] = {
    "validate": "Validate an experiment spec.",
    "artifacts": "Identify the binaries or images a launcher runs (hashes, digests).",
    "plan": "Expand a spec into its sweep points and run order.",
    "facts": "Collect this host's topology and noise facts.",
    "pairs": "List the valid pattern × notifier pairs, or an inventory's host pairs (--inventory).",
    "run-point": "Run one repeat of one sweep point and write its run record.",
    "ingest": "Load run records into PostgreSQL (idempotent per run id; all or nothing).",
    "report": "Aggregate an experiment's runs into a CSV and figures.",
    "db": "Manage the database (embedded PostgreSQL or DEMUXLAB_DATABASE_URL).",
    "model": "CTMC performance models of HSHA and LF.",
    "claims": "A verdict for every seed claim and the best design per workload.",
    "bundle": "Reproducibility bundles: create, verify, import, reproduce, rerun.",
    "cluster": "Sweeps across host pairs: provisioning, facts, progress, quarantine.",
    "slurm": "Slurm sweeps: progress per partition, the node report, quarantine.",
    "hosts": "Store facts of inventory hosts in the hosts table.",
    "testbed": "The test cluster on this machine: up | down | status.",
    "dashboard": "Serve the web dashboard (read-only) on 127.0.0.1:8050.",
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported only when invoked."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = _COMMANDS.get(cmd_name)
        if target is None:
            return None
        module = importlib.import_module(target[0])
        command = getattr(module, target[1])
        if not isinstance(command, click.Command):
            raise TypeError(f"{target[0]}:{target[1]} is not a click command")
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Short help from the table above, so --help imports nothing heavy.
        rows = [(name, _HELP.get(name, "")) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="demuxlab")
def cli() -> None:
    """demuxlab: which event-processing design pattern over which I/O notifier is fastest, and why."""


def main(argv: list[str] | None = None) -> Any:
    """Entry point: user errors become one line on stderr and a non-zero exit, never a traceback."""
    try:
        return cli.main(args=argv, prog_name="demuxlab", standalone_mode=False)
    except DemuxlabError as exc:
        click.echo(f"demuxlab: error: {exc.message}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("demuxlab: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
