"""``demuxlab db``: the database in use (embedded PostgreSQL or ``DEMUXLAB_DATABASE_URL``) and its schema."""

from __future__ import annotations

import os
import sys

import click

from demuxlab.errors import ConfigError, DatabaseError


def _embedded_only(verb: str) -> None:
    from demuxlab.db.engine import ENV_URL, external_url, mask_url

    url = external_url()
    if url is not None:
        raise ConfigError(f"{ENV_URL} is set ({mask_url(url)}): demuxlab does not {verb} that server")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def db() -> None:
    """Manage the database: embedded PostgreSQL under the state folder, or DEMUXLAB_DATABASE_URL."""


@db.command()
@click.option("--show-password", is_flag=True, help="Print the password instead of ***.")
def url(show_password: bool) -> None:
    """Print the SQLAlchemy URL in use (does not start anything)."""
    from demuxlab.db.engine import database_url, mask_url

    value = database_url()
    click.echo(value if show_password else mask_url(value))


@db.command()
@click.argument("revision", default="head")
def upgrade(revision: str) -> None:
    """Upgrade the schema to REVISION (default: head); starts the embedded cluster if needed."""
    from demuxlab.db import migrations

    migrations.upgrade(revision)
    click.echo(f"schema at {migrations.current_revision() or 'base'}")


@db.command()
@click.argument("revision")
def downgrade(revision: str) -> None:
    """Downgrade the schema to REVISION ('base' removes every table)."""
    from demuxlab.db import migrations

    migrations.downgrade(revision)
    click.echo(f"schema at {migrations.current_revision() or 'base'}")


@db.command()
def start() -> None:
    """Create (once) and start the embedded PostgreSQL, and create its 'demuxlab' database."""
    from demuxlab.db.embedded import Cluster

    _embedded_only("start")
    cluster = Cluster.default()
    result = cluster.ensure_running()
    state = "started" if result.started else "already running"
    created = ", initialized" if result.initialized else ""
    click.echo(f"embedded PostgreSQL {state}{created}: {cluster.data_dir}")


@db.command()
def stop() -> None:
    """Stop the embedded PostgreSQL."""
    from demuxlab.db.embedded import Cluster

    _embedded_only("stop")
    cluster = Cluster.default()
    was_running = cluster.stop()
    click.echo(f"embedded PostgreSQL {'stopped' if was_running else 'was not running'}: {cluster.data_dir}")


@db.command()
def status() -> None:
    """Say where the database is, whether it is up, and its schema revision; exit 1 if it is down."""
    from demuxlab.db import migrations
    from demuxlab.db.embedded import Cluster
    from demuxlab.db.engine import database_url, external_url, get_engine, mask_url

    url = database_url()
    click.echo(f"url: {mask_url(url)}")
    if external_url() is None:
        cluster = Cluster.default()
        click.echo(f"embedded: {cluster.data_dir}")
        click.echo(f"initialized: {'yes' if cluster.is_initialized() else 'no'}")
        if not cluster.is_running():
            click.echo("running: no")
            sys.exit(1)
        click.echo("running: yes")
    try:
        engine = get_engine(url)
    except DatabaseError as exc:
        click.echo(f"reachable: no ({exc.message})")
        sys.exit(1)
    click.echo("reachable: yes")
    current, head = migrations.current_revision(engine), migrations.head_revision()
    note = "" if current == head else f" (head is {head}; run 'demuxlab db upgrade')"
    click.echo(f"schema: {current or 'base'}{note}")


@db.command()
def check() -> None:
    """Fail if the database schema and the models differ (alembic check)."""
    from demuxlab.db import migrations

    migrations.check()
    click.echo("schema matches the models")


@db.command(context_settings={"ignore_unknown_options": True})
@click.argument("psql_args", nargs=-1, type=click.UNPROCESSED)
def psql(psql_args: tuple[str, ...]) -> None:
    """Run psql on the database (extra arguments go to psql)."""
    import shutil

    from demuxlab.db.embedded import pg_bin_dir
    from demuxlab.db.engine import database_url, get_engine, parse_url

    get_engine()  # starts the embedded cluster if that is the one in use
    conninfo = parse_url(database_url()).set(drivername="postgresql").render_as_string(hide_password=False)
    try:
        binary = str(pg_bin_dir() / "psql")
    except DatabaseError:
        binary = ""
    if not os.path.exists(binary):
        binary = shutil.which("psql") or ""
    if not binary:
        raise DatabaseError("psql not found (install the PostgreSQL client)")
    os.execv(binary, [binary, conninfo, *psql_args])
