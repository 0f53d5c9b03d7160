"""An adaptive experiment round by round through the commands the workflow calls (``demuxlab adaptive next``,
``demuxlab adaptive decisions``), with run records made here from a known figure instead of a host."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from demuxlab.point import Point

DEMUXLAB = str(Path(sys.executable).with_name("demuxlab"))

SPEC = """name: grid
reproduces: none
seed: 11
repeats: 5
phases: {warmup_s: 1, measure_s: 10, cooldown_s: 0}
calibration: {repeats: 0}
adaptive: {steady: null, repeats: {min: 3, target_rel: 0.05}, points: {coarse: 3}}
designs:
  - {pattern: lf, notifiers: [epoll-lt]}
  - {pattern: multireactor, notifiers: [epoll-lt]}
matrix: {threads: [1, 2, 3, 4, 5, 6, 7, 8], work_us: [0], connections: [64], msg_size: [1]}
"""


def truth(p: Point) -> float:
    """LF peaks at 3 threads; the multi-reactor's reactors add up, as its model says (issue 19: every
    pattern has a model, zero work too)."""
    if p.pattern == "lf":
        return 20000.0 - 1500.0 * abs(p.threads - 3)
    return 15000.0 * p.threads


def record(entry: dict[str, Any], spec_sha: str) -> dict[str, Any]:
    p = Point.from_json({**entry, **_fields(entry["point_key"])})
    rng = random.Random(f"{entry['point_key']}|{entry['repeat']}")
    level = truth(p) * (1 + 0.01 * rng.gauss(0, 1))
    samples = [level * (1 + 0.01 * rng.gauss(0, 1)) for _ in range(10)]
    return {
        "format": "demuxlab.run/1",
        "run_id": entry["run_id"],
        "experiment": {"name": "grid", "spec_sha256": spec_sha},
        "point": p.to_json(),
        "repeat": entry["repeat"],
        "attempt": 1,
        "status": "ok",
        "started_at": "2026-11-24T00:00:00Z",
        "phases": {"warmup_s": 1, "measure_s": 10, "cooldown_s": 0},
        "client": {"per_second": samples, "duration_s": 10},
        "stats": {"throughput_msgs_per_s": sum(samples) / len(samples)},
        "hosts": {"server": {"hostname": "box"}},
        "pinning": {"server_cpus": list(range(8))},
    }


def _fields(key: str) -> dict[str, Any]:
    pattern, notifier, t, w, c, b, ct, _r = key.split("/")
    return {
        "pattern": pattern,
        "notifier": notifier,
        "threads": int(t[1:]),
        "work_us": float(w[1:]),
        "connections": int(c[1:]),
        "msg_size": int(b[1:]),
        "client_threads": int(ct[2:]),
        "rate": None,
    }


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DEMUXLAB, *args], capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture
def experiment(tmp_path: Path) -> tuple[Path, Path]:
    spec = tmp_path / "grid.yaml"
    spec.write_text(SPEC)
    runs = tmp_path / "runs"
    runs.mkdir()
    return spec, runs


def test_rounds_until_the_stop_then_the_decisions(experiment: tuple[Path, Path], tmp_path: Path) -> None:
    import hashlib

    spec, runs = experiment
    sha = hashlib.sha256(spec.read_bytes()).hexdigest()
    seen: set[tuple[str, int]] = set()
    n = 0
    while True:
        out = tmp_path / f"round-{n}.json"
        res = cli("adaptive", "next", str(spec), "--records", str(runs), "--round", str(n), "--out", str(out))
        assert res.returncode == 0, res.stderr
        doc = json.loads(out.read_text())
        assert doc["round"] == n and doc["spec_sha256"] == sha
        if doc["stop"]:
            assert doc["runs"] == []
            break
        assert doc["runs"], "a round that does not stop asks for runs"
        for entry in doc["runs"]:
            key = (entry["point_key"], entry["repeat"])
            assert key not in seen  # no run is asked for twice
            seen.add(key)
            assert entry["reason"]
            (runs / f"{entry['run_id']}.json").write_text(json.dumps(record(entry, sha)))
        n += 1
        assert n < 30
    # A round is a deterministic function of the records: asking again gives the same bytes.
    again = tmp_path / "again.json"
    assert (
        cli(
            "adaptive", "next", str(spec), "--records", str(runs), "--round", "1", "--out", str(again)
        ).returncode
        == 0
    )
    assert again.read_text() == (tmp_path / "round-1.json").read_text()
    # A round after the next one cannot be decided yet.
    ahead = cli(
        "adaptive", "next", str(spec), "--records", str(runs), "--round", str(n + 1), "--out", str(again)
    )
    assert ahead.returncode == 2 and "is not done" in ahead.stderr
    decisions = tmp_path / "decisions.json"
    res = cli("adaptive", "decisions", str(spec), "--records", str(runs), "--out", str(decisions))
    assert res.returncode == 0, res.stderr
    doc = json.loads(decisions.read_text())
    grid = {p["point_key"]: p for p in doc["grid"]}
    assert len(grid) == 16 and doc["points"]["grid"] == 16
    measured = [p for p in grid.values() if p["measured"]]
    model_only = [p for p in grid.values() if not p["measured"]]
    assert model_only, "the multi-reactor curve its model describes needs no more than its coarse points"
    assert all(p["why"] and p["chosen_kind"] for p in measured)
    assert all(
        p["why"].startswith("model-only") and p["ci_low"] is None and p["runs"] == 0 for p in model_only
    )
    # LF's peak (3 threads) and its neighbours were measured, though the coarse design had 1, 4 (or 5) and 8.
    assert all(grid[f"lf/epoll-lt/t{t}/w0/c64/b1/ct1/rclosed"]["measured"] for t in (2, 3, 4))
    assert doc["run_s"]["spent"] < doc["run_s"]["fixed_design"]
    assert doc["runs"]["done"] == len(seen)
    assert doc["stop"].startswith("converged")


def test_records_of_another_spec_version_are_left_out(experiment: tuple[Path, Path], tmp_path: Path) -> None:
    spec, runs = experiment
    out = tmp_path / "round-0.json"
    assert (
        cli(
            "adaptive", "next", str(spec), "--records", str(runs), "--round", "0", "--out", str(out)
        ).returncode
        == 0
    )
    first = json.loads(out.read_text())["runs"][0]
    (runs / f"{first['run_id']}.json").write_text(json.dumps(record(first, "0" * 64)))
    spec.write_text(SPEC + "# edited: a new spec version, new run ids\n")
    res = cli("adaptive", "next", str(spec), "--records", str(runs), "--round", "1", "--out", str(out))
    assert res.returncode == 2 and "round 0 is not done" in res.stderr


def test_decisions_of_an_unfinished_experiment_are_refused(
    experiment: tuple[Path, Path], tmp_path: Path
) -> None:
    spec, runs = experiment
    res = cli("adaptive", "decisions", str(spec), "--records", str(runs), "--out", str(tmp_path / "d.json"))
    assert res.returncode == 2 and "no run records" in res.stderr
