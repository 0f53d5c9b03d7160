"""Where things live: the repository, the project state folder, the built binaries."""

from __future__ import annotations

import os
from pathlib import Path


def repo_root() -> Path:
    """The repository root: ``$DEMUXLAB_ROOT`` or the checkout this package is installed from."""
    env = os.environ.get("DEMUXLAB_ROOT")
    if env:
        return Path(env).resolve()
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "pyproject.toml").is_file() and (parent / "images").is_dir():
            return parent
    return Path.cwd()


def state_dir() -> Path:
    """Project state (embedded PostgreSQL cluster, caches): ``$DEMUXLAB_HOME`` or ``<repo>/.demuxlab``."""
    env = os.environ.get("DEMUXLAB_HOME")
    path = Path(env) if env else repo_root() / ".demuxlab"
    return path.resolve()


def bin_dir(variant: str = "") -> Path:
    """Built C binaries: ``$DEMUXLAB_BIN`` or ``<repo>/build/bin``; ``build/<variant>/bin`` for sanitizers."""
    env = os.environ.get("DEMUXLAB_BIN")
    if env and not variant:
        return Path(env).resolve()
    return repo_root() / "build" / (f"{variant}/bin" if variant else "bin")


def migrations_dir() -> Path:
    """The database's Alembic migrations: ``alembic.ini``, ``env.py``, ``versions/``."""
    return repo_root() / "migrations"


def experiments_dir() -> Path:
    return repo_root() / "experiments"
