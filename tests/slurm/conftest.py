"""The Slurm testbed for the slurm profile's tests: one per session (2 pairs, 4 nodes), with its own
folders, key and munge socket, so a developer's `make testbed SLURM=1` is never touched; removed at the end.

The hosts share the checkout and the Python of the virtualenv (demuxlab.testbed.shared_paths) and the
session's work folder (the workflow's working directory in the tests) with this machine at the same paths.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from slurm_helpers import SlurmBed


def _docker_ok() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0


@pytest.fixture(scope="session")
def slurm_bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmBed]:
    if not _docker_ok():
        pytest.skip("the Slurm tests need a running Docker engine (make setup)")
    for tool in ("sbatch", "sacct", "munged"):
        assert shutil.which(tool), f"{tool} missing: make setup installs slurm-client and munge"
    from demuxlab import testbed as tb
    from demuxlab.slurm import testbed as slurm_testbed

    base = tmp_path_factory.mktemp("slurmbed")
    work = base / "shared"
    work.mkdir()
    patch = pytest.MonkeyPatch()
    patch.setenv("DEMUXLAB_TESTBED_DIR", str(base / "state"))
    patch.setenv("DEMUXLAB_TESTBED_INVENTORY", str(base / "inventory"))
    try:
        state = slurm_testbed.up(2, log=lambda msg: None, shared=(str(work),))
        yield SlurmBed(state=state, work=work)
    finally:
        try:
            tb.down()
        finally:
            patch.undo()


@pytest.fixture(scope="module")
def slurm_db(pg_server: Any) -> Iterator[str]:
    name = f"slurm_{os.urandom(4).hex()}"
    url: str = pg_server.create_database(name, template=pg_server.template)
    try:
        yield url
    finally:
        pg_server.drop_database(name)
