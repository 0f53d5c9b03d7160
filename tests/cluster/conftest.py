"""The test cluster for real Ansible runs: one testbed per session (2 pairs, 4 hosts).

The host image is built once per recipe and cached in the Docker engine (cold: debootstrap, minutes;
cached: the hosts are up in seconds). The session's testbed has its own folder and inventory under a
temporary directory, so a developer's `make testbed` is never touched; it is removed at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_helpers import ROOT, Testbed


def _docker_ok() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0


def _image_id(name: str) -> str | None:
    proc = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", name],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


@pytest.fixture(scope="session")
def testbed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    if not _docker_ok():
        pytest.skip("the cluster tests need a running Docker engine (make setup)")
    from demuxlab import testbed as tb

    base = tmp_path_factory.mktemp("testbed")
    patch = pytest.MonkeyPatch()
    patch.setenv("DEMUXLAB_TESTBED_DIR", str(base / "state"))
    patch.setenv("DEMUXLAB_TESTBED_INVENTORY", str(base / "inventory"))
    try:
        state = tb.up(2, log=lambda msg: print(msg, file=sys.stderr))
        # The project's images under names of this session: another checkout rebuilding
        # demuxlab/server:latest meanwhile cannot change what these tests distribute.
        names = []
        for role in ("server", "client"):
            if _image_id(f"demuxlab/{role}:latest") is None:
                subprocess.run(
                    ["bash", str(ROOT / "images" / "build-image.sh"), role],
                    check=True,
                    capture_output=True,
                    timeout=300,
                )
            name = f"{tb.PREFIX}{state['id']}/{role}:test"
            subprocess.run(["docker", "tag", f"demuxlab/{role}:latest", name], check=True)
            names.append(name)
        # The session's settings as inventory group vars (not extra vars: a test overrides one host's).
        group_vars = base / "inventory" / "group_vars"
        group_vars.mkdir(parents=True, exist_ok=True)
        (group_vars / "all.yml").write_text(
            json.dumps(
                {
                    "images_names": names,
                    "images_cache_dir": str(base / "images"),
                    "host_facts_dir": str(base / "facts"),
                }
            )
            + "\n"
        )
        yield Testbed(state=state, inventory=base / "inventory", base=base, image_names=names)
    finally:
        try:
            tb.down()
            for name in names if "names" in locals() else []:
                subprocess.run(["docker", "rmi", name], capture_output=True, check=False)
        finally:
            patch.undo()


@pytest.fixture(scope="session")
def image_ids(testbed: Testbed) -> dict[str, str]:
    ids = {name: _image_id(name) for name in testbed.image_names}
    assert all(ids.values())
    return {k: v for k, v in ids.items() if v}


@pytest.fixture(scope="module")
def cluster_db(pg_server: Any) -> Iterator[str]:
    """A database at schema head shared by a module's runs (a second run must find the first's hosts)."""
    name = f"cluster_{os.urandom(4).hex()}"
    url: str = pg_server.create_database(name, template=pg_server.template)
    try:
        yield url
    finally:
        pg_server.drop_database(name)
