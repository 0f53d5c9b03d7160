"""Commands for the hosts of an inventory and for the test cluster.

``demuxlab hosts store FACTS.json…`` puts facts collected on cluster hosts (the ``host_facts`` role brings
them back to the controller) into the ``hosts`` table, the same rows ``demuxlab ingest`` writes for the
hosts of a run. ``demuxlab testbed up|down|status`` drives :mod:`demuxlab.testbed`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from demuxlab.errors import ConfigError

_REQUIRED = ("hostname", "online_cpus", "cpus")


def _read_facts(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: facts file not found") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    return _check_facts(doc, str(path))


def _check_facts(doc: Any, path: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: expected a facts object (docs/CONTRACTS.md §3), got {type(doc).__name__}")
    for key in _REQUIRED:
        if key not in doc:
            raise ConfigError(f"{path}: {key}: missing (docs/CONTRACTS.md §3)")
    if not isinstance(doc["hostname"], str) or not doc["hostname"]:
        raise ConfigError(f"{path}: hostname: expected a non-empty string, got {doc['hostname']!r}")
    return doc


def store_facts(paths: list[Path]) -> list[tuple[Path, int, str, bool]]:
    """Upsert each facts file into ``hosts`` (one transaction); see :func:`store_docs`."""
    return store_docs([(path, _read_facts(path)) for path in paths])


def store_docs(docs: list[tuple[Path, dict[str, Any]]]) -> list[tuple[Path, int, str, bool]]:
    """Upsert each (source, facts) into ``hosts`` (one transaction).

    Returns (source, host id, hostname, new); ``new`` is false when that machine state was known.
    """
    from sqlalchemy import select

    from demuxlab.db.engine import get_engine
    from demuxlab.db.models import Host
    from demuxlab.ingest import _host_row, _table, _upsert

    engine = get_engine()
    out: list[tuple[Path, int, str, bool]] = []
    with engine.begin() as conn:
        for path, doc in docs:
            row = _host_row(doc)
            known = conn.execute(select(Host.id).where(Host.facts_sha256 == row["facts_sha256"])).scalar()
            host_id = known if known is not None else _upsert(conn, _table(Host), ("facts_sha256",), row)
            out.append((path, host_id, doc["hostname"], known is None))
    return out


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
    from demuxlab.commands import write_json_atomic
    from demuxlab.db.migrations import upgrade

    docs: list[tuple[Path, dict[str, Any]]] = [(Path(p), _read_facts(Path(p))) for p in facts_files]
    if by_host is not None:
        where = by_host.name
        try:
            doc = json.load(by_host)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{where}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
        if not isinstance(doc, dict):
            raise ConfigError(f"{where}: expected an object {{host: facts}}, got {type(doc).__name__}")
        for host, facts in doc.items():
            checked = _check_facts(facts, f"{where}: {host}")
            docs.append((Path(write_dir or ".") / f"{host}.json", checked))
            if write_dir:
                write_json_atomic(Path(write_dir) / f"{host}.json", checked)
    if not docs:
        raise click.UsageError("give FACTS_FILES or --by-host")
    upgrade()
    for path, host_id, hostname, new in store_docs(docs):
        click.echo(f"{path}: host {hostname}: {'new' if new else 'known'}: hosts.id {host_id}")


@click.group()
def testbed() -> None:
    """The test cluster on this machine: K pairs of hosts reached over real SSH (playbooks/README.md)."""


@testbed.command("up")
@click.option("--pairs", type=click.IntRange(min=1, max=8), default=2, show_default=True)
@click.option(
    "--slurm",
    is_flag=True,
    help="Also run Slurm on the hosts (slurmctld, slurmdbd, a slurmd each; the checkout shared with them).",
)
@click.option(
    "--share",
    "shared",
    multiple=True,
    type=click.Path(file_okay=False),
    help="With --slurm: another folder the hosts share at the same path (e.g. a workflow's working folder).",
)
def testbed_up(pairs: int, slurm: bool, shared: tuple[str, ...]) -> None:
    """Create the testbed (host image built once and cached) and write inventories/testbed."""
    from demuxlab.testbed import up

    t0 = time.monotonic()
    if slurm:
        from demuxlab.slurm import testbed as slurm_testbed

        state = slurm_testbed.up(pairs, log=lambda msg: click.echo(msg, err=True), shared=shared)
    else:
        state = up(pairs, log=lambda msg: click.echo(msg, err=True))
    for h in state["hosts"]:
        note = " (CPUs shared with other hosts)" if h["cpus_shared"] else ""
        click.echo(f"{h['name']:<12} {h['address']:<15} cpus {h['cpus']}{note}")
    how = "built" if state["image_built"] else "cached"
    click.echo(
        f"testbed {state['id']}: {len(state['hosts'])} hosts up in {time.monotonic() - t0:.1f} s "
        f"(image {how}); inventory {state['inventory']}"
    )
    if "slurm" in state:
        sl = state["slurm"]
        click.echo(
            f"slurm: cluster {sl['cluster']}, controller {sl['controller']}, partitions "
            f"{', '.join(sl['partitions'])}, accounts {', '.join(sl['accounts'])}; client commands: "
            f"SLURM_CONF={sl['conf']}"
        )


@testbed.command("down")
@click.option("--purge", is_flag=True, help="Also remove the cached host image.")
def testbed_down(purge: bool) -> None:
    """Remove everything `testbed up` made (the cached host image only with --purge)."""
    from demuxlab.testbed import down

    removed = down(purge=purge)
    for item in removed:
        click.echo(f"removed {item}")
    if not removed:
        click.echo("testbed: nothing to remove")


@testbed.command("status")
@click.option("--json", "as_json", is_flag=True)
def testbed_status(as_json: bool) -> None:
    """Say what exists: image, network, volumes, each host's container."""
    from demuxlab.testbed import status

    doc = status()
    if as_json:
        click.echo(json.dumps(doc, indent=1))
        return
    click.echo(f"testbed {doc['id']}: image {doc['image']} {'present' if doc['image_present'] else 'absent'}")
    click.echo(f"network: {', '.join(doc['network']) or 'none'}; volumes: {len(doc['volumes'])}")
    for h in doc["hosts"]:
        state = "running" if h["running"] else ("stopped" if h["exists"] else "missing")
        click.echo(f"{h['name']:<12} {h['address']:<15} cpus {h['cpus']:<4} {state}")
    if not doc["hosts"]:
        click.echo("no hosts")
    for name in doc["unknown_containers"]:
        click.echo(f"container {name}: labelled as this testbed's but not in its state")
    click.echo(f"inventory: {doc['inventory'] or 'none'}")
