"""Compiling the project's C in a test: the compiler on PATH and the flags images/Makefile builds with
(its ``BASE_CFLAGS``, read from the Makefile so a test never builds with flags the project does not)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

IMAGES = Path(__file__).resolve().parents[2] / "images"


def cc() -> str:
    """The C compiler (cc, else gcc); a test fails with the setup step when there is none."""
    found = shutil.which("cc") or shutil.which("gcc")
    if found is None:
        pytest.fail("no C compiler on PATH (cc/gcc): run `make setup`")
    return found


def base_cflags(*, includes: bool = True) -> list[str]:
    """images/Makefile's ``BASE_CFLAGS``, its include directories made absolute (they are relative to
    images/); without them where ``includes`` is false (a test that decides what a source may see)."""
    text = (IMAGES / "Makefile").read_text()
    m = re.search(r"^override BASE_CFLAGS := (.+)$", text, flags=re.M)
    assert m is not None, "images/Makefile: no `override BASE_CFLAGS := ...` line"
    flags = m.group(1).split()
    return [
        f"-I{IMAGES / f[2:]}" if f.startswith("-I") else f
        for f in flags
        if includes or not f.startswith("-I")
    ]


def images_copy(root: Path, parts: tuple[str, ...]) -> Path:
    """A copy of images/ under ``root`` (its Makefile and ``parts``), for a test that adds a file and a
    table line to it and builds it (tests/images/test_new_notifier.py, test_new_pattern.py)."""
    images = root / "images"
    images.mkdir()
    shutil.copy2(IMAGES / "Makefile", images / "Makefile")
    for part in parts:
        shutil.copytree(IMAGES / part, images / part)
    return images


def make_targets(images: Path, build: Path, *targets: str) -> None:
    """``make`` of ``targets`` (paths under ``build``) in an images/ copy; the test fails with make's
    output where it does not build."""
    import subprocess

    res = subprocess.run(
        ["make", "-s", "-C", str(images), f"BUILD={build}", *(str(build / t) for t in targets)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
