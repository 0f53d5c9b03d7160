"""Serving the dashboard: waitress (a production WSGI server, pure Python, threaded)."""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading

import click

from demuxlab.dashboard.warm import warm
from demuxlab.errors import ConfigError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8050


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        try:
            return all(ipaddress.ip_address(a[4][0]).is_loopback for a in socket.getaddrinfo(host, None))
        except OSError:
            return False


def serve(
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    url: str | None = None,
    threads: int = 8,
    refresh_ms: int | None = None,
) -> None:
    """Serve on ``host:port`` until interrupted; bound beyond loopback, say so on stderr."""
    from waitress import serve as waitress_serve

    from demuxlab.dashboard.app import create_app

    if not (0 <= port <= 65535):
        raise ConfigError(f"--port: must be 0…65535, got {port}")
    app = create_app(url, refresh_ms=refresh_ms)
    if not is_loopback(host):
        click.echo(
            f"demuxlab dashboard: warning: listening on {host}, not only on this machine: anyone who can "
            "reach it can read the experiments (read-only). Use --host 127.0.0.1 to keep it local.",
            err=True,
        )
    # each step's line on stderr, beside the address below: what the first pages no longer wait for
    threading.Thread(target=warm, args=(_say,), name="dlx-warm", daemon=True).start()
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"demuxlab dashboard: http://{shown}:{port}/  (database {app_url()}; Ctrl-C stops)", err=True)
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
    waitress_serve(app.server, host=host, port=port, threads=threads, ident="demuxlab-dashboard")


def _say(line: str) -> None:
    click.echo(line, err=True)


def app_url() -> str:
    from demuxlab.dashboard import common

    return common.store().masked_url()
