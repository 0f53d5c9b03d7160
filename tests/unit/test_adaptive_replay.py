"""The replay benchmark on a sample of recorded runs (tests/data/adaptive/): `demuxlab adaptive replay` as
typed, over run records of a full fixed-design sweep made on this machine."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "adaptive"
DEMUXLAB = str(Path(sys.executable).with_name("demuxlab"))


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("adaptive-sample")
    with tarfile.open(DATA / "runs.tar.xz") as tar:
        tar.extractall(out, filter="data")
    return out / "runs"


def replay(records: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [DEMUXLAB, "adaptive", "replay", str(DATA / "adaptive-sample.yaml"), "--records", str(records)]
    return subprocess.run([*cmd, "--json", str(out), *extra], capture_output=True, text=True, timeout=600)


def test_the_sample_replays_with_fewer_runs_and_the_same_answer(records: Path, tmp_path: Path) -> None:
    res = replay(records, tmp_path / "all.json")
    assert res.returncode == 0, res.stderr
    doc = json.loads((tmp_path / "all.json").read_text())
    minutes = doc["run_minutes"]
    # The full design is every record: 12 points x 5 runs + 2 calibration points x 2, 11 s each.
    assert doc["runs"]["full"] == 64 and minutes["full"] == pytest.approx(64 * 11 / 60)
    assert doc["runs"]["adaptive"] < doc["runs"]["full"] and minutes["adaptive"] < minutes["full"]
    assert minutes["saving"] == pytest.approx(minutes["full"] / minutes["adaptive"])
    assert doc["points"]["adaptive"] < doc["points"]["full"] == 12
    # Every claim has a verdict in both; the comparison counts what it lists.
    assert len(doc["verdicts"]) == 10
    assert doc["verdicts_agree"] == sum(v["full"] == v["adaptive"] for v in doc["verdicts"])
    assert doc["best_agree"] == sum(b["full"] == b["adaptive"] for b in doc["best"])
    gap = doc["largest_gap"]
    assert gap is not None and gap["halfwidths"] >= 0
    assert doc["outside_full_interval"] <= doc["points"]["adaptive"]
    assert doc["stop"]
    lines = res.stdout.splitlines()
    assert lines[1].startswith("mechanisms: repeats (min 3, max 5, ±25.0%)")
    assert any(line.startswith("run-minutes: adaptive") and "x fewer" in line for line in lines)
    assert any(line.startswith("largest gap:") for line in lines)


def test_each_mechanism_alone_and_the_replay_is_deterministic(records: Path, tmp_path: Path) -> None:
    full = 64 * 11 / 60
    seen = {}
    for mechanism in ("repeats", "steady", "points"):
        res = replay(records, tmp_path / f"{mechanism}.json", "--mechanisms", mechanism, "--no-models")
        assert res.returncode == 0, res.stderr
        seen[mechanism] = json.loads((tmp_path / f"{mechanism}.json").read_text())
        assert seen[mechanism]["run_minutes"]["adaptive"] <= full + 1e-9
    # Steady stops cut seconds, not runs or points; points cut points; repeats neither points nor seconds.
    assert seen["steady"]["runs"]["adaptive"] == 64 and seen["steady"]["points"]["adaptive"] == 12
    assert seen["repeats"]["points"]["adaptive"] == 12
    # Points alone: each measured point gets all its 5 runs, and the 4 calibration runs are made.
    assert seen["points"]["runs"]["adaptive"] == 5 * seen["points"]["points"]["adaptive"] + 4
    again = replay(records, tmp_path / "again.json", "--mechanisms", "points", "--no-models")
    assert json.loads((tmp_path / "again.json").read_text()) == seen["points"]
    assert (
        again.stdout.splitlines()[1:]
        == replay(records, tmp_path / "b.json", "--mechanisms", "points", "--no-models").stdout.splitlines()[
            1:
        ]
    )


def test_a_record_missing_from_the_full_design_is_one_line(records: Path, tmp_path: Path) -> None:
    partial = tmp_path / "partial"
    partial.mkdir()
    for f in sorted(records.glob("*.json"))[1:]:
        (partial / f.name).write_bytes(f.read_bytes())
    res = replay(partial, tmp_path / "x.json", "--no-models")
    assert res.returncode == 2
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("demuxlab: error: records: no run of ") and "Traceback" not in res.stderr


def test_an_unknown_mechanism_is_refused(records: Path, tmp_path: Path) -> None:
    res = replay(records, tmp_path / "x.json", "--mechanisms", "faster")
    assert res.returncode == 2 and "'faster' is not one of repeats, steady, points" in res.stderr


def test_the_benchmark_refuses_targets_of_a_mechanism_the_spec_has_off(records: Path, tmp_path: Path) -> None:
    """bench/fidelity/adaptive_replay.py (`make bench B=adaptive_replay`): --targets for a mechanism the
    spec turns off is one line naming the option and the spec (it was an AssertionError's traceback), as is
    a spec without an adaptive block; nothing was replayed."""
    text = (DATA / "adaptive-sample.yaml").read_text()
    steady_off = tmp_path / "steady-off" / "adaptive-sample.yaml"  # a spec's name is its file's
    fixed = tmp_path / "fixed" / "adaptive-sample.yaml"
    for path, body in (
        (steady_off, text.replace("  steady: {min_s: 5, target_rel: 0.1}\n", "  steady: null\n")),
        (fixed, text.split("adaptive:\n")[0] + "designs:" + text.split("\ndesigns:", 1)[1]),
    ):
        path.parent.mkdir()
        path.write_text(body)
    repo = Path(__file__).resolve().parents[2]
    for path, option, line in (
        (
            steady_off,
            "steady=0.1",
            f"adaptive_replay.py: error: --targets: steady is off in the spec {steady_off}",
        ),
        (fixed, "repeats=0.2", f"adaptive_replay.py: error: {fixed}: the spec has no adaptive block"),
    ):
        res = subprocess.run(
            [sys.executable, "-m", "bench", "adaptive_replay", str(path), "--records", str(records),
             "--targets", option],
            capture_output=True, text=True, timeout=300, cwd=repo,
        )  # fmt: skip
        assert res.returncode == 2 and res.stdout == "", res.stderr[-3000:]
        (got,) = res.stderr.strip().splitlines()
        assert got.startswith(line) and "Traceback" not in res.stderr, got
