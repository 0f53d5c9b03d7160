"""``demuxlab db``: url, status, check, help, and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from demuxlab.cli import main
from demuxlab.cli.db import db
from demuxlab.db.embedded import Cluster

SUBCOMMANDS = ["url", "upgrade", "downgrade", "start", "stop", "status", "check", "psql"]


def test_help() -> None:
    runner = CliRunner()
    result = runner.invoke(db, ["--help"])
    assert result.exit_code == 0
    for name in SUBCOMMANDS:
        assert name in result.output
        sub = runner.invoke(db, [name, "--help"])
        assert sub.exit_code == 0 and "Usage:" in sub.output, name


def test_url_external_masks_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEMUXLAB_DATABASE_URL", "postgresql+psycopg://me:pw@db.example:5433/lab")
    runner = CliRunner()
    assert runner.invoke(db, ["url"]).output == "postgresql+psycopg://me:***@db.example:5433/lab\n"
    shown = runner.invoke(db, ["url", "--show-password"]).output
    assert shown == "postgresql+psycopg://me:pw@db.example:5433/lab\n"


def test_url_embedded_starts_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("DEMUXLAB_DATABASE_URL", raising=False)
    monkeypatch.setenv("DEMUXLAB_HOME", str(tmp_path))
    out = CliRunner().invoke(db, ["url"]).output.strip()
    assert out == Cluster(tmp_path).url()
    assert f"host={tmp_path}/pg/run" in out.replace("%2F", "/") and "port=54329" in out
    assert not (tmp_path / "pg").exists()


def test_start_refuses_external(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DEMUXLAB_DATABASE_URL", "postgresql+psycopg://me:pw@db.example/lab")
    with pytest.raises(SystemExit) as info:
        main(["db", "start"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not start that server" in err and "pw" not in err


def test_unreachable_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DEMUXLAB_DATABASE_URL", "postgresql+psycopg://me:pw@127.0.0.1:1/lab")
    with pytest.raises(SystemExit) as info:
        main(["db", "upgrade"])
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "demuxlab: error: cannot connect to database postgresql+psycopg://me:***@127.0.0.1:1/lab"
    )
    assert err.count("\n") == 1


@pytest.mark.postgres
def test_status_check_upgrade_downgrade(database_url: str) -> None:
    from demuxlab.db.migrations import head_revision

    head = head_revision()  # the newest migration, whichever it is
    runner = CliRunner()
    status = runner.invoke(db, ["status"])
    assert status.exit_code == 0, status.output
    assert "reachable: yes" in status.output and f"schema: {head}\n" in status.output
    check = runner.invoke(db, ["check"])
    assert check.exit_code == 0 and "matches" in check.output

    down = runner.invoke(db, ["downgrade", "base"])
    assert down.exit_code == 0 and down.output == "schema at base\n"
    assert "run 'demuxlab db upgrade'" in runner.invoke(db, ["status"]).output
    up = runner.invoke(db, ["upgrade"])
    assert up.exit_code == 0 and up.output == f"schema at {head}\n"


@pytest.mark.postgres
def test_psql_runs_a_query(database_url: str) -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from demuxlab.cli import main; main()",
            "db",
            "psql",
            "-tAc",
            "SELECT count(*) FROM runs",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "0"
