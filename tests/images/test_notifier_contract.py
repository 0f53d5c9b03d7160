"""The notifier contract in C (images/server/src/notifier.h) is enforced, not just written: every notifier
back-end (notify_*.c) compiles with notifier.h and efd.h (and the count of its system calls, sysc.h and
uring_sys.h) as the only project headers it can see, and its object needs nothing from the rest of the
server (no `srv`, stop flag, thread statistics, `die`...): none of
its undefined symbols is defined by another server source."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from helpers.cbuild import base_cflags, cc

SRC = Path(__file__).resolve().parents[2] / "images" / "server" / "src"
# What a back-end may include besides system headers: the contract, the eventfd kicks, the epoll
# back-ends' shared part (itself a back-end file), the count of the system calls it makes (sysc.h, shared
# with the client, in images/common) and liburing's calls so counted (uring_sys.h).
CONTRACT_HEADERS = ["notifier.h", "efd.h", "notify_epoll.h", "uring_sys.h", "../../common/sysc.h"]
BACKENDS = sorted(p.name for p in SRC.glob("notify_*.c"))
# The project's flags, without its include directories: a back-end sees only what a test passes with -I.
CFLAGS = base_cflags(includes=False)


def compile_object(src: Path, out: Path, *include: Path) -> None:
    res = subprocess.run(
        [cc(), *CFLAGS, *(f"-I{d}" for d in include), "-c", str(src), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, f"{src.name} does not compile against the contract alone:\n{res.stderr}"


def symbols(obj: Path, *flags: str) -> set[str]:
    out = subprocess.run(["nm", *flags, str(obj)], capture_output=True, text=True, check=True, timeout=60)
    return {line.split()[-1] for line in out.stdout.splitlines() if line.strip()}


@pytest.fixture(scope="module")
def server_symbols(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """Every global symbol the server's other sources (main, config, conn, the patterns...) define."""
    out = tmp_path_factory.mktemp("server-objects")
    common = SRC.parents[1] / "common"
    defined: set[str] = set()
    for src in sorted(SRC.glob("*.c")):
        if src.name in BACKENDS or src.name == "notifiers.c":
            continue
        obj = out / (src.stem + ".o")
        compile_object(src, obj, SRC, common)
        defined |= symbols(obj, "--defined-only", "--extern-only")
    return defined


def test_there_are_backends() -> None:
    assert {"notify_select.c", "notify_poll.c", "notify_epoll.c", "notify_uring.c"} <= set(BACKENDS)


@pytest.mark.parametrize("backend", BACKENDS)
def test_backend_sees_only_the_contract(tmp_path: Path, backend: str, server_symbols: set[str]) -> None:
    # The back-end is copied beside the contract headers alone: a quoted #include of anything else (server.h,
    # instr.h, conn.h, ...) finds nothing, not even in the back-end's own directory.
    for name in [backend, *CONTRACT_HEADERS]:
        shutil.copy(SRC / name, tmp_path / Path(name).name)
    obj = tmp_path / "backend.o"
    compile_object(tmp_path / backend, obj)
    needed = symbols(obj, "--undefined-only")
    reached = sorted(needed & server_symbols)
    assert not reached, f"{backend} reaches into the server: {reached}"


def test_the_check_catches_a_backend_reaching_the_server(tmp_path: Path, server_symbols: set[str]) -> None:
    """The checks above can fail: a back-end that includes server.h does not compile alone, and one that
    declares a server global itself is caught by its symbols."""
    for name in CONTRACT_HEADERS:
        shutil.copy(SRC / name, tmp_path / Path(name).name)
    bad = tmp_path / "notify_bad.c"
    bad.write_text('#include "server.h"\n')
    res = subprocess.run([cc(), *CFLAGS, "-c", str(bad), "-o", str(tmp_path / "x.o")], capture_output=True)
    assert res.returncode != 0
    sneaky = tmp_path / "notify_sneaky.c"
    sneaky.write_text('#include "notifier.h"\nvoid die(const char *fmt, ...);\nvoid f(void) { die("x"); }\n')
    compile_object(sneaky, tmp_path / "sneaky.o")
    assert "die" in symbols(tmp_path / "sneaky.o", "--undefined-only") & server_symbols
