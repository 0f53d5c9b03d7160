"""STYLE.md's C examples (redis `ae.c` with its backends, liburing's `examples/`, a plain Makefile) as
contracts on images/ and on every C build of the repository.

"Backends include only the loop's header" is tests/images/test_notifier_contract.py (each back-end compiled
against notifier.h alone, its symbols checked); it is not repeated here. Comments that say why, one context
struct, static helpers named by verb and a single cleanup path need a reader: docs/ARCHITECTURE.md, "Style
contracts".
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers.cbuild import base_cflags

REPO = Path(__file__).resolve().parents[2]
IMAGES = REPO / "images"
SERVER = IMAGES / "server" / "src"
CLIENT = IMAGES / "client" / "src"
COMMON = IMAGES / "common"
HEADERS = sorted([*SERVER.glob("*.h"), *CLIENT.glob("*.h"), *COMMON.glob("*.h")])
C_SOURCES = sorted([*SERVER.glob("*.c"), *CLIENT.glob("*.c"), *COMMON.glob("*.c"), *IMAGES.glob("bench/*.c")])
MUST_HOLD = ("-Wall", "-Wextra", "-Werror")
MAX_HEADER_LINES = 200  # a public header past this holds more than one concern
FAKE_CC = "contract-cc"  # `make -n CC=...`: every compiler call of the dry run starts with this word


def cc() -> str:
    found = shutil.which("cc") or shutil.which("gcc")
    if found is None:
        pytest.fail("no C compiler on PATH (cc/gcc): run `make setup`")
    return found


def rel(path: Path) -> str:
    return str(path.relative_to(REPO))


# --- headers --------------------------------------------------------------------------------------------


def include_dirs(header: Path) -> list[str]:
    """Where a header's own quoted includes are found: its folder and common/ (never another program's)."""
    return [f"-I{header.parent}", f"-I{COMMON}"]


@pytest.mark.parametrize("header", HEADERS, ids=rel)
def test_header_is_small_guarded_and_says_its_concern(header: Path) -> None:
    """STYLE.md, C: "A small public header: event masks, callback typedefs, a loop struct": each header
    opens with a comment naming itself and its one concern (`/* name.h -- what it is`), is guarded against a
    second inclusion, and stays under MAX_HEADER_LINES lines."""
    text = header.read_text()
    assert text.startswith(f"/* {header.name} -- "), (
        f"{rel(header)}: does not open with '/* {header.name} -- '"
    )
    guard = re.search(r"^#ifndef (\w+)\n#define \1\b", text, re.M)
    assert guard, f"{rel(header)}: no include guard (#ifndef X / #define X)"
    assert text.rstrip().endswith("#endif") or re.search(r"#endif\s*(/\*.*\*/)?\s*$", text), rel(header)
    lines = text.count("\n")
    assert lines <= MAX_HEADER_LINES, (
        f"{rel(header)}: {lines} lines, over {MAX_HEADER_LINES}: split it by concern"
    )


@pytest.mark.parametrize("header", HEADERS, ids=rel)
def test_header_stands_alone(tmp_path: Path, header: Path) -> None:
    """STYLE.md, C: "A small public header": a public header compiles on its own (it includes what it
    uses), so any file may include it first, with the warnings that every build treats as errors."""
    unit = tmp_path / "only.c"
    unit.write_text(f'#include "{header.name}"\n')
    res = subprocess.run(
        [cc(), "-std=gnu11", *MUST_HOLD, "-fsyntax-only", *include_dirs(header), str(unit)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, f"{rel(header)} does not compile alone:\n{res.stderr}"


def test_the_header_check_can_fail(tmp_path: Path) -> None:
    """STYLE.md, C: "A small public header": the stand-alone check catches a header that leans on an
    include its user happened to make first."""
    (tmp_path / "leaning.h").write_text(
        "/* leaning.h -- x */\n#ifndef L_H\n#define L_H\nsize_t f(void);\n#endif\n"
    )
    (tmp_path / "only.c").write_text('#include "leaning.h"\n')
    res = subprocess.run(
        [cc(), "-std=gnu11", *MUST_HOLD, "-fsyntax-only", f"-I{tmp_path}", str(tmp_path / "only.c")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode != 0


# --- the back-ends: one file each, the same handful of functions ------------------------------------------


def struct_members(text: str, struct: str) -> set[str]:
    body = re.search(rf"struct {struct} \{{(.*?)\n\}};", text, re.S)
    assert body, f"struct {struct} not found"
    members = set()
    for decl in body[1].split(";"):
        decl = re.sub(r"/\*.*?\*/", "", decl, flags=re.S).strip()
        if m := re.search(r"\(\s*\*\s*(\w+)\s*\)\s*\(", decl) or re.search(r"(\w+)\s*$", decl):
            members.add(m[1])
    return members


def test_every_backend_fills_every_operation() -> None:
    """STYLE.md, C: "One file per backend, all with the same handful of functions": each notify_*.c that
    defines a back-end defines exactly one `const struct notifier_ops`, names every member of the contract
    in it, and notifier.h's NOTIFIER_TABLE (notifiers.c's table) lists each back-end once."""
    header = (SERVER / "notifier.h").read_text()
    members = struct_members(header, "notifier_ops")
    assert {"create", "destroy", "add", "del", "rearm", "wait", "wake", "edge"} <= members
    defined = {}
    for src in sorted(SERVER.glob("notify_*.c")):
        text = src.read_text()
        tables = re.findall(r"^const struct notifier_ops (\w+) = \{(.*?)^\};", text, re.S | re.M)
        assert len(tables) <= 1, f"{src.name}: {len(tables)} back-ends in one file"
        for name, body in tables:
            named = set(re.findall(r"^\s*\.(\w+)\s*=", body, re.M))
            assert named == members, (
                f"{src.name}: {name} sets {sorted(named)}, the contract has {sorted(members)}"
            )
            defined[name] = src.name
    assert len(defined) >= 5
    table = re.search(r"^#define NOTIFIER_TABLE\(X\)(.*?)\n\n", header, re.S | re.M)
    assert table is not None, "notifier.h: no NOTIFIER_TABLE (the one list of back-ends)"
    listed = re.findall(r"X\(\w+, \"[\w-]+\", (notifier_\w+)\)", table[1])
    assert sorted(listed) == sorted(defined), f"NOTIFIER_TABLE: {sorted(listed)}, back-ends: {defined}"
    assert "NOTIFIER_TABLE(" in (SERVER / "notifiers.c").read_text()  # the table notifiers.c is built from


# --- getopt and a usage line; errors ---------------------------------------------------------------------


@pytest.mark.parametrize("program", ["demux-server", "demux-client"])
def test_getopt_with_a_usage_line(program: str) -> None:
    """STYLE.md, C: "liburing examples: ... `getopt` with a usage line": --help prints the usage (exit 0);
    an unknown option is one line on stderr pointing at --help (exit 2), parsed by getopt_long."""
    binary = REPO / "build" / "bin" / program
    assert binary.exists(), f"{binary} missing: run `make build`"
    helped = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=30)
    assert helped.returncode == 0 and helped.stdout.startswith(f"usage: {program} "), helped.stdout[:200]
    bad = subprocess.run([str(binary), "--no-such-option"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2
    assert bad.stderr == f"{program}: unknown option '--no-such-option' (see --help)\n"
    parser = SERVER / "config.c" if program == "demux-server" else CLIENT / "main.c"
    assert "getopt_long(" in parser.read_text()


def test_errors_name_the_program_and_the_cause() -> None:
    """STYLE.md, C: "errors printed with `strerror(-ret)` and a hint": no source prints with perror(),
    whose line names neither the program nor what to do; every line a program writes to stderr starts with
    its name (`PROG ": "`, `"demux-server: "`, ...) or is a JSON event, and errno's text comes from
    strerror."""
    using = [rel(src) for src in C_SOURCES if re.search(r"\bperror\s*\(", src.read_text())]
    assert not using, f"perror() in {using}"
    assert sum("strerror(" in src.read_text() for src in C_SOURCES) >= 5
    # common/ code names the program it is linked into: "%s: …", program_invocation_short_name
    named = re.compile(r'^(PROG\s*": |"[a-z][\w-]*: |"\{|"%s: [^"]*",\s*program_invocation_short_name)')
    unnamed = []
    for src in C_SOURCES:
        text = src.read_text()
        written = [m[1] for m in re.finditer(r"\bfprintf\(\s*stderr,\s*(.*)", text)]
        written += [m[1] for m in re.finditer(r"\bfputs\(\s*(.*?),\s*stderr\)", text)]
        unnamed += [f"{rel(src)}: {w[:60]}" for w in written if not named.match(w)]
    assert not unnamed, f"stderr lines that do not name the program: {unnamed}"


# --- the Makefile and every build ---------------------------------------------------------------------------


def makefile_dry_run(*targets: str, **variables: str) -> list[list[str]]:
    """The compiler calls `make -n -B` would run for the targets, with variables set on the command line."""
    res = subprocess.run(
        ["make", "-n", "-B", "-C", str(IMAGES), *targets, *(f"{k}={v}" for k, v in variables.items())],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    calls = [line.split() for line in res.stdout.splitlines() if line.startswith(FAKE_CC + " ")]
    assert calls, f"no compiler call in `make -n {' '.join(targets)}`"
    return calls


def test_makefile_cflags_user_settable_with_flags_that_always_hold() -> None:
    """STYLE.md, C: "A plain Makefile: `CFLAGS ?= -O2 -g -Wall`, `override` for flags that must always
    hold": CFLAGS is the user's (`?=`), and the warnings-as-errors survive any CFLAGS or BASE_CFLAGS given
    on make's command line, in every binary the Makefile builds."""
    text = (IMAGES / "Makefile").read_text()
    assert re.search(r"^CFLAGS \?=", text, re.M), "images/Makefile: no `CFLAGS ?=`"
    assert re.search(r"^override \w+ :?= .*-Wall -Wextra -Werror", text, re.M), "no `override` with -Werror"
    targets = ("build", "sanitize", "bench-helpers")
    calls = makefile_dry_run(*targets, CC=FAKE_CC, CFLAGS="-O0", BASE_CFLAGS="-O1")
    assert len(calls) >= 8
    for call in calls:
        missing = [f for f in MUST_HOLD if f not in call]
        assert not missing, f"images/Makefile builds {call[call.index('-o') + 1]} without {missing}"
        assert "-O0" in call, "CFLAGS from the command line is not passed"


def test_makefile_has_sanitizer_builds() -> None:
    """STYLE.md, C: "A plain Makefile: ... a sanitizer switch": `make sanitize` builds the ASan+UBSan and
    the TSan variants of both programs beside the release build (build/asan, build/tsan), so one test
    session runs all three; tests/images/test_sanitizers.py runs them."""
    calls = makefile_dry_run("sanitize", CC=FAKE_CC)
    outputs = {call[call.index("-o") + 1]: call for call in calls}
    expected = {"asan": "-fsanitize=address,undefined", "tsan": "-fsanitize=thread"}
    for variant, flag in expected.items():
        for program in ("server", "client"):
            out = f"../build/{variant}/bin/demux-{program}.tmp"
            assert out in outputs and flag in outputs[out], (
                f"`make sanitize` does not build {out} with {flag}"
            )


def compiler_flag_lists(path: Path) -> list[tuple[int, list[str]]]:
    """(line, flags) of each list or tuple of string constants in a Python file that holds C compiler flags
    (a -std= or an -O level)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.List | ast.Tuple):
            words = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if any(re.fullmatch(r"-std=\w+|-O[0-3sg]?", w) for w in words):
                found.append((node.lineno, words))
    return found


def test_every_c_build_treats_warnings_as_errors() -> None:
    """STYLE.md, C: "`override` for flags that must always hold" (-Wall -Wextra -Werror in every build,
    the project's standard): the C compiled outside images/Makefile (peer servers of the benchmarks, the
    tests' own programs) is compiled with the same three flags."""
    python_files = [p for d in ("bench", "tests", "src", "scripts") for p in sorted((REPO / d).rglob("*.py"))]
    # The tests' shared builder takes images/Makefile's BASE_CFLAGS: they must hold the three.
    helper_flags = base_cflags()
    assert not [f for f in MUST_HOLD if f not in helper_flags], helper_flags
    checked = 0
    for path in python_files:
        text = path.read_text()
        # A C compile: the compiler's name (or the shared builder's), and an object or output to make
        # (`cc --version` is none).
        helper = re.search(r"^from helpers\.cbuild import .*\bcc\b", text, flags=re.M)
        compiles = (re.search(r"""["'](cc|gcc|clang)["']""", text) or helper) and re.search(
            r"""["'](-c|-o)["']""", text
        )
        lists = compiler_flag_lists(path)
        if path.name == Path(__file__).name:
            continue
        if helper:
            # Built through helpers.cbuild: its flags are the Makefile's, checked above.
            assert re.search(r"\bbase_cflags\(", text), (
                f"{rel(path)} compiles with cc() but not base_cflags()"
            )
            checked += 1
            continue
        if compiles:
            assert lists, f"{rel(path)} runs a C compiler with no flag list this check can read"
        for line, flags in lists:
            missing = [f for f in MUST_HOLD if f not in flags]
            assert not missing, f"{rel(path)}:{line}: C flags without {missing}"
            checked += 1
    assert checked >= 3
    shell = [
        p
        for p in [*REPO.glob("scripts/*.sh"), *IMAGES.glob("*.sh")]
        if re.search(r"\b(cc|gcc) ", p.read_text())
    ]
    assert not shell, f"C compiled by a shell script, outside the Makefile: {[rel(p) for p in shell]}"
