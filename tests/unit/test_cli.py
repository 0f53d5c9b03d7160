"""The CLI frame: every command has --help, user errors are one line with a non-zero exit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from demuxlab.cli import COMMANDS

DEMUXLAB = str(Path(sys.executable).with_name("demuxlab"))


def demuxlab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DEMUXLAB, *args], capture_output=True, text=True, timeout=120, check=False)


def test_top_level_help_lists_every_command() -> None:
    res = demuxlab("--help")
    assert res.returncode == 0
    for name in COMMANDS:
        assert name in res.stdout


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_help(name: str) -> None:
    res = demuxlab(name, "--help")
    assert res.returncode == 0, res.stderr
    assert "Usage: demuxlab" in res.stdout and "--help" in res.stdout


def test_unknown_command_is_refused() -> None:
    res = demuxlab("frobnicate")
    assert res.returncode == 2 and "No such command 'frobnicate'" in res.stderr


def test_validate_reports_file_field_problem(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: bad\nreproduces: none\ndesigns:\n  - {pattern: reactor, notifiers: [epoll-lt]}\n"
        "matrix: {threads: [1, -1], work_us: [0], connections: [4], msg_size: [1]}\n"
    )
    res = demuxlab("validate", "--no-pairs", str(bad))
    assert res.returncode == 2
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("demuxlab: error: ") and "bad.yaml: matrix.threads[1]" in line


def test_validate_missing_file(tmp_path: Path) -> None:
    res = demuxlab("validate", "--no-pairs", str(tmp_path / "nope.yaml"))
    assert res.returncode == 2 and "nope.yaml" in res.stderr and "Traceback" not in res.stderr


def test_validate_shipped_specs_schema_only() -> None:
    for spec in sorted(Path(__file__).resolve().parents[2].joinpath("experiments").glob("*.yaml")):
        res = demuxlab("validate", "--no-pairs", str(spec))
        assert res.returncode == 0, res.stderr
        assert ": ok: " in res.stdout


# What a command module of demuxlab.cli may not import at module level: --help imports every one of them.
HEAVY = ("numpy", "scipy", "sqlalchemy", "pandas", "dash", "jsonschema", "yaml", "numba", "matplotlib")


CLI_MODULES = sorted({"demuxlab.cli", *(m for m, _ in COMMANDS.values() if m.startswith("demuxlab.cli."))})


@pytest.mark.parametrize("module", CLI_MODULES)
def test_command_modules_import_no_library(module: str) -> None:
    code = f"import sys, {module}; print(' '.join(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert res.stdout.strip() == "", f"{module} imports {res.stdout.strip()} at module level"


def test_help_lists_each_commands_own_first_sentence() -> None:
    from demuxlab.cli import cli

    res = demuxlab("--help")
    for name in COMMANDS:
        command = cli.get_command(None, name)  # type: ignore[arg-type]
        assert command is not None and command.help
        first = " ".join(command.help.split("\n\n")[0].split()).split(". ")[0].rstrip(".")
        assert " ".join(first.split()[:4]) in " ".join(res.stdout.split()), (name, first)
