"""bench/perf/orchestration_bench.py: its options, its verdicts, and one real native run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import bench.perf.orchestration_bench as ob

REPO = Path(__file__).resolve().parents[2]
MODULE = "bench.perf.orchestration_bench"


def sample(orch: float, status: str = "ok", reason: str | None = None) -> object:
    return ob.RunSample(
        wall_s=1.5 + orch, orchestration_s=orch, status=status, failure_reason=reason, steps={}
    )


def result(*samples: object, target: float = 2.0) -> object:
    return ob.LauncherResult(
        name="native", label="native", target_s=target, phases_s=1.5, samples=list(samples)
    )


def test_parse_launchers_accepts_known_names_and_refuses_the_rest() -> None:
    assert ob.parse_launchers("native, docker") == ["native", "docker"]
    with pytest.raises(ob.BenchError, match="unknown launcher 'ssh'"):
        ob.parse_launchers("native,ssh")
    with pytest.raises(ob.BenchError, match="twice"):
        ob.parse_launchers("native,native")
    with pytest.raises(ob.BenchError, match="empty"):
        ob.parse_launchers(" , ")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--runs", "0"], "--runs must be >= 1"),
        (["--measure-s", "0"], "--measure-s must be > 0"),
        (["--launchers", "ssh"], "unknown launcher 'ssh'"),
        (["--bogus"], "unrecognized arguments"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(args: list[str], needle: str) -> None:
    res = subprocess.run(
        [sys.executable, "-m", MODULE, *args], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert res.returncode == 2
    assert needle in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert res.stdout == ""


def test_verdict_judges_every_run_against_the_target() -> None:
    assert result(sample(0.1), sample(1.9)).verdict == "PASS"
    assert result(sample(0.1), sample(2.1)).verdict == "FAIL"
    assert result(sample(0.1), sample(0.0, "failed", "server did not start")).verdict == "FAIL"
    assert result().verdict == "FAIL"
    unavailable = result()
    unavailable.unavailable = "demux-server not found"
    assert unavailable.verdict == "N/A"


def test_summary_uses_ok_runs_and_failures_are_grouped_by_reason() -> None:
    r = result(sample(0.2), sample(0.0, "failed", "boom"), sample(0.4), sample(0.0, "failed", "boom"))
    table = ob.summary_table([r])
    row = table.splitlines()[2].split()
    assert row[:3] == ["native", "4", "2"]
    assert "0.300 s" in table and "0.400 s" in table and "FAIL" in table
    assert ob.failure_lines(r) == ["native: runs 2, 4 failed: boom"]


@pytest.mark.slow
def test_native_row_measures_real_runs() -> None:
    args = ["--runs", "2", "--measure-s", "0.3", "--warmup-s", "0.2", "--launchers", "native", "--no-cli"]
    res = subprocess.run(
        [sys.executable, "-m", MODULE, *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert res.returncode in (0, 1), res.stderr
    lines = res.stdout.splitlines()
    row = next(ln for ln in lines if ln.startswith("native "))
    assert row.split()[1:3] == ["2", "2"], res.stdout  # two runs, both ok
    per_run = next(ln for ln in lines if ln.startswith("native: orchestration_s per run: "))
    values = [float(v) for v in per_run.split(": ")[-1].split(", ")]
    assert len(values) == 2 and all(0 < v < 30 for v in values)
    assert ("PASS" in row) == (max(values) <= 2.0)
