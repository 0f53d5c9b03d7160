"""The open loop's arrival times (images/client/src/arrivals.c): gaps beyond the clock's range end a
stream instead of wrapping (or, in C, converting a double past 2^64: undefined), and fractions of a
nanosecond are carried rather than dropped.

The checks live in images/client/tests/test_arrivals.c; this test compiles it with the project's warning
flags and UBSan (float-cast-overflow is not part of -fsanitize=undefined, so it is named) and runs it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers.cbuild import base_cflags
from helpers.cbuild import cc as find_cc

REPO = Path(__file__).resolve().parents[2]
CLIENT = REPO / "images" / "client"
SANITIZE = ["-fsanitize=undefined,float-cast-overflow", "-fno-sanitize-recover=all"]


def test_arrivals_unit(tmp_path: Path) -> None:
    exe = tmp_path / "test_arrivals"
    sources = [str(CLIENT / "tests" / "test_arrivals.c"), str(CLIENT / "src" / "arrivals.c")]
    build = subprocess.run(
        [find_cc(), *base_cflags(), *SANITIZE, f"-I{CLIENT / 'src'}", *sources, "-o", str(exe), "-lm"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "ok"
