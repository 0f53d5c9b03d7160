"""The shared C helpers (images/common): histogram accuracy, strict parsers, clocks, CPU time.

The checks live in images/common/tests/test_common.c (percentiles of known distributions within 1%,
parser edge cases, spin_us burning CPU rather than sleeping, spin_cpu_us's time being the thread's CPU time
beside threads that wake on its CPU); this test compiles it with the project's
warning flags and runs it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from helpers.cbuild import base_cflags
from helpers.cbuild import cc as find_cc

REPO = Path(__file__).resolve().parents[2]
COMMON = REPO / "images" / "common"
CFLAGS = [*base_cflags(), "-pthread"]


@pytest.fixture(scope="module")
def cc() -> str:
    return find_cc()


def test_common_unit(cc: str, tmp_path: Path) -> None:
    exe = tmp_path / "test_common"
    sources = [str(COMMON / "tests" / "test_common.c"), *sorted(str(p) for p in COMMON.glob("*.c"))]
    build = subprocess.run(
        [cc, *CFLAGS, f"-I{COMMON}", *sources, "-o", str(exe), "-lm"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "ok"


def test_common_headers_compile_alone(cc: str, tmp_path: Path) -> None:
    """Each header is self-contained: a file including only it compiles warning-free."""
    for header in ("hist.h", "util.h"):
        src = tmp_path / f"only_{header}.c"
        src.write_text(f'#include "{header}"\nint main(void) {{ return 0; }}\n')
        build = subprocess.run(
            [cc, *CFLAGS, f"-I{COMMON}", "-c", str(src), "-o", str(tmp_path / "x.o")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert build.returncode == 0, f"{header}: {build.stderr}"
