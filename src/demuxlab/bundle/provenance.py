"""What a bundle records beside the experiments' files: the project's source (a ``git archive`` of the
runs' revision, and the uncommitted diff of a dirty tree) and the environment (Python packages, compiler,
kernel, distribution, the run hosts)."""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from demuxlab import paths
from demuxlab.bundle.archive import BundleError


def _git(*args: str, binary: bool = False) -> Any:
    proc = subprocess.run(
        ["git", "-C", str(paths.repo_root()), *args], capture_output=True, timeout=120, check=False
    )
    if proc.returncode != 0:
        return None
    return proc.stdout if binary else proc.stdout.decode().strip()


def source(revisions: set[str]) -> tuple[dict[str, Any], list[tuple[str, bytes, str]]]:
    """A ``git archive`` of the runs' revision (and the uncommitted diff, if they ran on a dirty tree): the
    bundle document's ``source`` and the files to add, each with what it is."""
    wanted = sorted(revisions)
    rev = wanted[-1] if wanted else None
    note = None
    if len(wanted) > 1:
        note = f"runs were made at several revisions: {', '.join(wanted)}; the last is archived"
    commit = rev.removesuffix("-dirty") if rev else None
    if commit is None or _git("cat-file", "-e", f"{commit}^{{commit}}") is None:
        head = _git("rev-parse", "HEAD")
        if head is None:
            raise BundleError(f"{paths.repo_root()}: not a git repository: the source cannot be bundled")
        note = f"revision {rev!r} of the runs is not in this repository; HEAD is archived instead"
        commit, rev = head, head
    archive = _git("archive", "--format=tar", "--prefix=demuxlab/", commit, binary=True)
    if archive is None:
        raise BundleError(f"git archive {commit} failed")
    files = [
        ("source/demuxlab-source.tar", archive, f"the project's source at revision {commit} (`git archive`)")
    ]
    out: dict[str, Any] = {"revision": rev, "commit": commit, "archive": "source/demuxlab-source.tar"}
    if rev and rev.endswith("-dirty"):
        patch = _git("diff", commit, binary=True)
        if patch:
            what = "uncommitted changes of the working tree at bundle time (the runs ran on a dirty tree)"
            files.append(("source/uncommitted.patch", patch, what))
            out["patch"] = "source/uncommitted.patch"
    if note:
        out["note"] = note
    return out, files


def _first_line(argv: Sequence[str]) -> str | None:
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (proc.stdout or proc.stderr).strip().splitlines()
    return lines[0] if proc.returncode == 0 and lines else None


def _os_release() -> str | None:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return None


def environment(hosts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    packages = sorted(
        {(d.metadata["Name"], d.version) for d in importlib.metadata.distributions() if d.metadata["Name"]},
        key=lambda nv: nv[0].lower(),
    )
    return {
        "python": platform.python_version(),
        "packages": [f"{n}=={v}" for n, v in packages],
        "compiler": _first_line(["cc", "--version"]),
        "snakemake": next((v for n, v in packages if n.lower() == "snakemake"), None),
        "bundle_host": {
            "kernel": platform.release(),
            "distribution": _os_release(),
            "machine": platform.machine(),
        },
        "run_hosts": [
            {
                "hostname": h["hostname"],
                "kernel": h["kernel"],
                "cpu_model": h["cpu_model"],
                "distribution": (h["facts"] or {}).get("distribution"),
                "facts_sha256": h["facts_sha256"],
            }
            for h in hosts
        ],
    }
