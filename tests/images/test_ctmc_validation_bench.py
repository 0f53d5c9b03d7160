"""bench/ctmc_validation.py without a spec (its manual sweep) needs no database, CLI or spec library: a
tiny sweep with them made unimportable still calibrates, measures, predicts and prints its table."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BLOCKED = ("sqlalchemy", "psycopg", "alembic", "click", "yaml", "jsonschema", "snakemake", "matplotlib")
RUNNER = """
import runpy, sys
for name in {blocked!r}:
    sys.modules[name] = None  # importing it now raises ImportError
sys.path.insert(0, {bench!r})
sys.argv = ["ctmc_validation.py", *{args!r}]
runpy.run_path({script!r}, run_name="__main__")
"""


def bench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Runs the bench with the database, CLI and spec libraries unimportable."""
    code = RUNNER.format(
        blocked=BLOCKED,
        bench=str(REPO / "bench"),
        args=list(args),
        script=str(REPO / "bench" / "ctmc_validation.py"),
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path, check=False
    )


def test_light_runner_sweeps_calibrates_and_predicts(tmp_path: Path, server_bin: Path) -> None:
    out, runs = tmp_path / "val.json", tmp_path / "runs.json.gz"
    res = bench(
        tmp_path,
        "--patterns", "lf,hsha", "--work", "10", "--threads", "1-2", "--connections", "8",
        "--duration", "0.5", "--warmup", "0.2", "--method", "exact", "--jobs", "1", "--json", str(out),
        "--runs-out", str(runs), "--probe",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    assert "mean |error|" in res.stdout and "calib err" in res.stdout
    assert "other processes' share of the CPUs during the runs" in res.stdout and "load average" in res.stdout
    doc = json.loads(out.read_text())
    assert doc["server_cpus"] and doc["client_cpus"] and not set(doc["server_cpus"]) & set(doc["client_cpus"])
    points = {(p["pattern"], p["threads"]): p for p in doc["points"]}
    assert set(points) == {("lf", 1), ("lf", 2), ("hsha", 2)}  # HSHA needs 2 threads
    cals = {c["workload"][1]: c for c in doc["calibrations"]}
    assert set(cals) == {"lf", "hsha"}
    for p in points.values():
        assert p["measured"] > 0 and p["paper"] > 0 and all(0.0 <= b <= 1.0 for b in p["background"])
        # calibrated from this run's instrumented runs, unless the fit refused (then it says why)
        assert (p["calibrated"] is not None and p["calibrated"] > 0) or cals[p["pattern"]]["refused"]
    for c in cals.values():
        assert (c["rates_per_us"] is not None and c["self_check"]) or c["refused"]

    # --probe: an instrumented run of LF at 2 threads (its calibration is at 1) is kept, not calibrated from.
    kept = json.loads(gzip.decompress(runs.read_bytes()))["runs"]
    instr = sorted((r["point"]["pattern"], r["point"]["threads"]) for r in kept if r["point"]["instrument"])
    assert instr == [("hsha", 2), ("lf", 1), ("lf", 2)]
    probe = next(
        r
        for r in kept
        if r["point"]["instrument"] and r["point"]["threads"] == 2 and r["point"]["pattern"] == "lf"
    )
    assert probe["server"]["ops"] and probe["server"]["threads"] == 2

    # The same runs replayed (the points from the runs' file, not from the options): the same measurements,
    # calibrations and predictions, and no run.
    again = tmp_path / "again.json"
    res = bench(tmp_path, "--replay", str(runs), "--method", "exact", "--jobs", "1", "--json", str(again))
    assert res.returncode == 0, res.stderr[-2000:]
    assert "# replay of" in res.stdout and "msg/s, background" not in res.stdout
    redo = json.loads(again.read_text())
    assert redo["points"] == doc["points"]
    assert redo["calibrations"] == doc["calibrations"]


def test_replay_of_a_file_that_is_not_runs_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "runs.json.gz"
    bad.write_text("not gzip")
    res = bench(tmp_path, "--replay", str(bad))
    assert res.returncode == 1
    assert res.stderr.strip().splitlines() == [
        f"ctmc_validation.py: error: --replay {bad}: not a --runs-out file (Not a gzipped file (b'no'))"
    ]
