"""``demuxlab dashboard``: serve the dashboard (waitress), starting the embedded database as needed. Thin:
the work is :func:`demuxlab.dashboard.server.serve`."""

from __future__ import annotations

import os

import click

from demuxlab.dashboard.server import DEFAULT_HOST, DEFAULT_PORT


@click.command("dashboard")
@click.option(
    "--host", default=DEFAULT_HOST, show_default=True, help="Address to listen on (warns unless loopback)."
)
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(1, 65535))
@click.option("--threads", default=8, show_default=True, type=click.IntRange(1, 64), help="Worker threads.")
@click.option(
    "--refresh-ms",
    default=5000,
    show_default=True,
    type=click.IntRange(200, 3_600_000),
    help="How often the live views look for new runs.",
)
def dashboard(host: str, port: int, threads: int, refresh_ms: int) -> None:
    """Serve the dashboard on HOST:PORT, reading the database through the read-only role.

    With the embedded database (no DEMUXLAB_DATABASE_URL, no DEMUXLAB_DASHBOARD_DATABASE_URL) the cluster
    is started and its schema brought to head first, as the owner; the dashboard itself only reads.
    """
    from demuxlab.dashboard.server import serve
    from demuxlab.db.engine import DASHBOARD_ENV_URL, ENV_URL, readonly_url

    if not os.environ.get(DASHBOARD_ENV_URL, "").strip() and not os.environ.get(ENV_URL, "").strip():
        from demuxlab.db import migrations
        from demuxlab.db.engine import get_engine

        migrations.ensure_schema(get_engine())
    serve(host, port, url=readonly_url(), threads=threads, refresh_ms=refresh_ms)
