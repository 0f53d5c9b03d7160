"""The xdist groups of tests/conftest.py, read from the real suite's collection: what shares the testbed,
the Docker images or a module-scoped fixture runs on one worker; everything else on any."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A plugin that prints each collected test's xdist groups, after every other hook has marked them.
PLUGIN = """
import json, pytest

@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    groups = {i.nodeid: sorted(m.args[0] for m in i.iter_markers("xdist_group")) for i in items}
    print("GROUPS " + json.dumps(groups))
"""


def groups_of(tmp_path: Path, *paths: str) -> dict[str, list[str]]:
    (tmp_path / "print_groups.py").write_text(PLUGIN)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "print_groups",
            *paths,
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("GROUPS "))
    groups: dict[str, list[str]] = json.loads(line.removeprefix("GROUPS "))
    return groups


def test_groups_of_the_suite(tmp_path: Path) -> None:
    groups = groups_of(
        tmp_path,
        "tests/cluster/test_testbed.py",
        "tests/slurm/test_slurm_sweep.py",
        "tests/images/test_docker_images.py",
        "tests/integration/test_launch.py",
        "tests/bundle/test_bundle_roundtrip.py",
        "tests/contracts/test_style_snakemake.py",
        "tests/unit/test_vocab.py",
    )
    by_file: dict[str, set[tuple[str, ...]]] = {}
    for nodeid, names in groups.items():
        by_file.setdefault(nodeid.split("::", 1)[0], set()).add(tuple(names))
    # The session's testbed and the Slurm testbed: one worker (containers demuxlab-tb-*).
    assert by_file["tests/cluster/test_testbed.py"] == {("testbed",)}
    assert by_file["tests/slurm/test_slurm_sweep.py"] == {("testbed",)}
    # The project's images and their tags: one worker.
    assert by_file["tests/images/test_docker_images.py"] == {("docker",)}
    launch = {n: g for n, g in groups.items() if n.startswith("tests/integration/test_launch.py::")}
    assert launch["tests/integration/test_launch.py::test_docker_run_matches_native_contract"] == ["docker"]
    assert launch["tests/integration/test_launch.py::test_get_launcher_names"] == []  # any worker
    # A module-scoped fixture (one workflow run for the module): the module on one worker.
    assert by_file["tests/bundle/test_bundle_roundtrip.py"] >= {
        ("module:tests/bundle/test_bundle_roundtrip.py",)
    }
    # An explicit mark is kept as it is (shared scratch folders).
    assert by_file["tests/contracts/test_style_snakemake.py"] == {
        ("module:tests/contracts/test_style_snakemake.py",)
    }
    assert by_file["tests/unit/test_vocab.py"] == {()}


def test_a_group_runs_on_one_worker() -> None:
    """Two workers, a group of three tests and six tests of no group: the group's tests all ran on one
    worker (xdist's own loadgroup does not group on pytest 9.2; tests/conftest.py schedules them)."""
    res = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-n", "2", "-v", "-p", "no:cacheprovider",
            "tests/contracts/test_style_snakemake.py", "tests/unit/test_vocab.py",
            "-k", "profiles_found or the_path_check_can_fail or default_target or vocab or schema",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    ran = dict(
        (m.group(2), m.group(1))
        for m in re.finditer(r"^\[(gw\d+)\] \[ *\d+%\] PASSED (\S+)", res.stdout, flags=re.M)
    )
    grouped = {w for test, w in ran.items() if test.startswith("tests/contracts/test_style_snakemake.py::")}
    assert len([t for t in ran if "test_style_snakemake" in t]) == 3 and len(grouped) == 1, ran
    assert len(ran) >= 6
