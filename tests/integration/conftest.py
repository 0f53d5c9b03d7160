"""Fixtures for the end-to-end tests: a running Docker engine, the built binaries."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from helpers.server import build_target

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def docker_engine() -> None:
    """The Docker engine `make setup` starts; its absence is a failure, not a skip."""
    res = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=60, check=False)
    if res.returncode != 0:
        pytest.fail(f"the Docker engine does not answer (run `make setup`): {res.stderr.strip()[:200]}")


@pytest.fixture(scope="session")
def binaries() -> Path:
    """build/bin with both binaries and wake-cost (built by `make build`, which `make test` runs first)."""
    bin_dir = REPO / "build" / "bin"
    build_target(*(f"../build/bin/{name}" for name in ("demux-server", "demux-client", "wake-cost")))
    return bin_dir
