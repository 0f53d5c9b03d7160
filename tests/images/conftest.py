"""Fixtures for driving demux-server (the helpers themselves are in ``tests/helpers/server.py``)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from helpers.server import ROOT, Server, build_target, start_server


@pytest.fixture(scope="session")
def server_bin() -> Path:
    build_target("../build/bin/demux-server")
    return ROOT / "build" / "bin" / "demux-server"


@pytest.fixture(scope="session")
def valid_pairs(server_bin: Path) -> list[dict[str, Any]]:
    out = subprocess.run([str(server_bin), "--list"], check=True, capture_output=True, text=True, timeout=10)
    pairs: list[dict[str, Any]] = json.loads(out.stdout)
    return pairs


@pytest.fixture
def run_server(server_bin: Path) -> Iterator[Callable[..., Server]]:
    """Starts servers for a test and makes sure none outlives it."""
    started: list[Server] = []

    def _start(args: Sequence[str], **kw: Any) -> Server:
        srv = start_server(kw.pop("binary", server_bin), args, **kw)
        started.append(srv)
        return srv

    yield _start
    for srv in started:
        if srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.communicate()
