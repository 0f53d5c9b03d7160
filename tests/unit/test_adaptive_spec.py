"""The ``adaptive:`` block of a spec, as typed on the command line: accepted settings, and each bad setting
refused in one line naming the file and the field (docs/adaptive.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from demuxlab.spec import load_spec

DEMUXLAB = str(Path(sys.executable).with_name("demuxlab"))

BASE = """name: {name}
reproduces: none
repeats: 5
phases: {{warmup_s: 1, measure_s: 10, cooldown_s: 0}}
calibration: {{repeats: 2}}
designs:
  - {{pattern: lf, notifiers: [epoll-lt, select]}}
  - {{pattern: reactor, notifiers: [epoll-lt], threads: [1]}}
matrix: {{threads: [1, 2, 3, 4, 6, 8], work_us: [0], connections: [64], msg_size: [1]}}
"""


def spec_file(tmp_path: Path, adaptive: str, name: str = "grid") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(BASE.format(name=name) + (f"adaptive: {adaptive}\n" if adaptive else ""))
    return path


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    cmd = [DEMUXLAB, "validate", "--no-pairs", str(path)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def test_an_empty_block_turns_every_mechanism_on_with_its_defaults(tmp_path: Path) -> None:
    spec = load_spec(spec_file(tmp_path, "{}"))
    a = spec.adaptive
    assert a is not None and a.mechanisms == ("repeats", "steady", "points")
    assert a.repeats is not None and (a.repeats.min, a.repeats.max, a.repeats.target_rel) == (3, 5, 0.05)
    assert a.steady is not None and (a.steady.min_s, a.steady.target_rel) == (5.0, 0.02)
    assert a.points is not None and (a.points.coarse, a.points.target_rel) == (3, 0.05)
    assert a.budget_h is None
    assert spec.to_json()["adaptive"]["repeats"]["max"] == 5
    assert validate(spec_file(tmp_path, "{}")).returncode == 0


def test_a_spec_without_the_block_keeps_its_fixed_design(tmp_path: Path) -> None:
    spec = load_spec(spec_file(tmp_path, ""))
    assert spec.adaptive is None and "adaptive" not in spec.to_json()
    assert spec.max_repeats == 5
    for shipped in sorted(Path(__file__).resolve().parents[2].joinpath("experiments").glob("*.yaml")):
        loaded = load_spec(shipped)
        if loaded.reproduces != "none":  # the seeds' reproductions keep the seeds' fixed designs
            assert loaded.adaptive is None, shipped


def test_a_mechanism_set_to_null_is_off_and_a_maximum_above_repeats_is_allowed(tmp_path: Path) -> None:
    spec = load_spec(spec_file(tmp_path, "{steady: null, points: null, repeats: {min: 2, max: 8}}"))
    assert spec.adaptive is not None and spec.adaptive.mechanisms == ("repeats",)
    assert spec.max_repeats == 8  # run-point accepts repeats up to the adaptive maximum


AT_MOST_0 = "less than or equal to the minimum of 0"


@pytest.mark.parametrize(
    ("block", "field", "says"),
    [
        ("{repeats: {target_rel: 0}}", "adaptive.repeats.target_rel", AT_MOST_0),
        ("{repeats: {target_rel: -0.1}}", "adaptive.repeats.target_rel", AT_MOST_0),
        ("{steady: {target_rel: 0}}", "adaptive.steady.target_rel", AT_MOST_0),
        ("{points: {target_rel: 0}}", "adaptive.points.target_rel", AT_MOST_0),
        ("{repeats: {min: 4, max: 3}}", "adaptive.repeats.min", "4 is above adaptive.repeats.max (3)"),
        ("{repeats: {min: 6}}", "adaptive.repeats.min", "6 is above adaptive.repeats.max (null: the spec's"),
        ("{repeats: {min: 1}}", "adaptive.repeats.min", "less than the minimum of 2"),
        (
            "{budget_h: 0.05}",
            "adaptive.budget_h",
            "0.05 h is less than the coarse design needs (0.0825 h: 27",
        ),
        ("{budget_h: 0}", "adaptive.budget_h", AT_MOST_0),
        ("{steady: {min_s: 12}}", "adaptive.steady.min_s", "12 s is more than phases.measure_s (10 s)"),
        ("{points: {coarse: 1}}", "adaptive.points.coarse", "less than the minimum of 2"),
        ("{repeat: {min: 2}}", "adaptive", "'repeat' was unexpected"),
        ("[1, 2]", "adaptive", "is not of type 'object', 'null'"),
    ],
)
def test_a_bad_setting_is_one_line_naming_the_field(
    tmp_path: Path, block: str, field: str, says: str
) -> None:
    res = validate(spec_file(tmp_path, block))
    assert res.returncode == 2, res.stdout
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith(f"demuxlab: error: {tmp_path / 'grid.yaml'}: {field}: "), line
    assert says in line, line
    assert "Traceback" not in res.stderr


def test_the_budget_counts_the_coarse_design_and_the_calibration_runs(tmp_path: Path) -> None:
    # Coarse: lf/epoll-lt and lf/select at 3 of 6 thread counts, reactor at its one: 7 points x 3 repeats,
    # and 3 calibration points (LF's two, the reactor's: every pattern is modelled) x 2 runs = 27 runs of
    # 11 s.
    need_h = 27 * 11 / 3600
    assert validate(spec_file(tmp_path, f"{{budget_h: {need_h + 0.0001:.4f}, steady: null}}")).returncode == 0
    res = validate(spec_file(tmp_path, f"{{budget_h: {need_h - 0.001:.4f}, steady: null}}"))
    assert res.returncode == 2 and "27 runs of 11 s" in res.stderr
