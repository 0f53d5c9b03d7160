"""bench/ctmc_validation.py without a spec (its manual sweep) needs no database, CLI or spec library: a
tiny sweep with them made unimportable still calibrates, measures, predicts and prints its table."""

from __future__ import annotations

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


def test_light_runner_sweeps_calibrates_and_predicts(tmp_path: Path, server_bin: Path) -> None:
    out = tmp_path / "val.json"
    args = [
        "--patterns", "lf,hsha", "--work", "10", "--threads", "1-2", "--connections", "8",
        "--duration", "0.5", "--warmup", "0.2", "--method", "exact", "--jobs", "1", "--json", str(out),
    ]  # fmt: skip
    code = RUNNER.format(
        blocked=BLOCKED,
        bench=str(REPO / "bench"),
        args=args,
        script=str(REPO / "bench" / "ctmc_validation.py"),
    )
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path, check=False
    )
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
