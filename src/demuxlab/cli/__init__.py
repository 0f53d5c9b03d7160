"""The ``demuxlab`` command line: the top layer (docs/ARCHITECTURE.md, "Layers").

``demuxlab.cli:main`` is the entry point. Each command group is one thin module of this package (:mod:`.run`,
:mod:`.db`, :mod:`.bundle`, :mod:`.cluster`, :mod:`.slurm`, :mod:`.hosts`, :mod:`.testbed`, :mod:`.model`,
:mod:`.claims`, :mod:`.dashboard`, :mod:`.adaptive`) that imports only click at module level and the library
inside its commands, so ``demuxlab --help`` lists every command's own short help (the first sentence of its
docstring) without importing numpy, scipy or SQLAlchemy, and the thin commands the Snakemake rules call pay
only for what they use.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from demuxlab.errors import DemuxlabError

# name -> (module, attribute) of a click.Command or click.Group, imported when the command is looked up.
COMMANDS: dict[str, tuple[str, str]] = {
    "validate": ("demuxlab.cli.run", "validate"),
    "artifacts": ("demuxlab.cli.run", "artifacts"),
    "plan": ("demuxlab.cli.run", "plan"),
    "facts": ("demuxlab.cli.run", "facts"),
    "pairs": ("demuxlab.cli.run", "pairs"),
    "run-point": ("demuxlab.cli.run", "run_point"),
    "controller-lock": ("demuxlab.cli.run", "controller_lock"),
    "ingest": ("demuxlab.cli.run", "ingest"),
    "report": ("demuxlab.cli.run", "report"),
    "db": ("demuxlab.cli.db", "db"),
    "bundle": ("demuxlab.cli.bundle", "bundle"),
    "cluster": ("demuxlab.cli.cluster", "cluster"),
    "slurm": ("demuxlab.cli.slurm", "slurm"),
    "hosts": ("demuxlab.cli.hosts", "hosts"),
    "testbed": ("demuxlab.cli.testbed", "testbed"),
    "model": ("demuxlab.cli.model", "model"),
    "claims": ("demuxlab.cli.claims", "claims"),
    "adaptive": ("demuxlab.cli.adaptive", "adaptive"),
    "dashboard": ("demuxlab.cli.dashboard", "dashboard"),
}


# The longest first sentence --help shows of a command (wrapped); a longer one is cut with "...".
SHORT_HELP_CHARS = 120


class LazyGroup(click.Group):
    """A group whose subcommands are imported only when they are looked up (to run, or for --help)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        command = getattr(importlib.import_module(target[0]), target[1])
        if not isinstance(command, click.Command):
            raise TypeError(f"{target[0]}:{target[1]} is not a click command")
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Each command's own first sentence, wrapped rather than cut at the terminal's width.
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=SHORT_HELP_CHARS)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="demuxlab")
def cli() -> None:
    """demuxlab: which event-processing design pattern over which I/O notifier is fastest, and why."""


def emit_json(doc: object, out: str | None) -> None:
    """A command's JSON output: into ``out`` (atomically) when given, else on stdout."""
    if out:
        from pathlib import Path

        from demuxlab.jsonio import write_json_atomic

        write_json_atomic(Path(out), doc)
    else:
        import json

        click.echo(json.dumps(doc, indent=1))


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
