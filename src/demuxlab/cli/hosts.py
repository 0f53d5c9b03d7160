"""``demuxlab hosts store``: facts of inventory hosts into the hosts table (:mod:`demuxlab.ingest.hosts`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click


@click.group()
def hosts() -> None:
    """Hosts of cluster inventories: store the facts the host_facts role collected."""


@hosts.command("store")
@click.argument("facts_files", nargs=-1, type=click.Path(dir_okay=False))
@click.option(
    "--by-host",
    "by_host",
    type=click.File("r"),
    help="Read one JSON object {inventory host: facts} (`-` for stdin) instead of files.",
)
@click.option(
    "--write-dir",
    type=click.Path(file_okay=False),
    help="With --by-host: also write each host's facts to DIR/<host>.json.",
)
def hosts_store(facts_files: tuple[str, ...], by_host: Any, write_dir: str | None) -> None:
    """Store facts documents (docs/CONTRACTS.md §3) in the hosts table; idempotent per machine state."""
    from demuxlab.db.migrations import upgrade
    from demuxlab.ingest.hosts import facts_by_host, read_facts, store_docs

    docs = [(Path(p), read_facts(Path(p))) for p in facts_files]
    if by_host is not None:
        docs += facts_by_host(by_host, Path(write_dir) if write_dir else None)
    if not docs:
        raise click.UsageError("give FACTS_FILES or --by-host")
    upgrade()
    for path, host_id, hostname, new in store_docs(docs):
        click.echo(f"{path}: host {hostname}: {'new' if new else 'known'}: hosts.id {host_id}")
