"""The lean run start-up (demuxlab-run): it trusts the controller's checked spec only for the spec it was
made from, imports nothing heavy, and runs a simulated cluster run to the same record as run-point."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from demuxlab.errors import DemuxlabError
from demuxlab.launch.sim import SimLauncher
from demuxlab.runpoint_lean import checked_doc, checked_doc_of, load_checked, main
from demuxlab.spec import load_spec, run_id, run_order
from demuxlab.stats import steady_state

SPEC = """name: lean
reproduces: none
launcher: native
seed: 3
repeats: 2
phases: {warmup_s: 0, measure_s: 0.2, cooldown_s: 0}
calibration: {repeats: 0}
designs:
  - {pattern: reactor, notifiers: [poll, epoll-lt]}
matrix: {threads: [1], work_us: [0], connections: [8], msg_size: [1]}
"""


@pytest.fixture
def checked(tmp_path: Path) -> tuple[Path, Path]:
    spec_path = tmp_path / "lean.yaml"
    spec_path.write_text(SPEC)
    spec = load_spec(spec_path)
    points = {p.point_key: p for p, _ in run_order(spec)}
    out = tmp_path / "checked.json"
    out.write_text(json.dumps(checked_doc(spec, list(points.values()))))
    return spec_path, out


def test_checked_spec_is_trusted_only_for_the_same_bytes(checked: tuple[Path, Path]) -> None:
    spec_path, out = checked
    loaded = load_checked(out, "rev1")
    assert loaded.name == "lean" and loaded.git_rev == "rev1"
    assert loaded.phases.measure_s == pytest.approx(0.2)
    assert len(loaded.points) == 2
    spec_path.write_text(SPEC.replace("seed: 3", "seed: 4"))
    with pytest.raises(DemuxlabError, match="changed since the workflow checked it"):
        load_checked(out)


def test_checked_doc_of_a_spec_file(checked: tuple[Path, Path]) -> None:
    spec_path, out = checked
    assert checked_doc_of(spec_path) == json.loads(out.read_text())


def test_unknown_point_is_one_line(checked: tuple[Path, Path]) -> None:
    _, out = checked
    with pytest.raises(DemuxlabError, match="is not a point of this spec"):
        load_checked(out).point("reactor/select/t1/w0/c8/b1/ct1/rclosed")


def test_start_up_imports_nothing_heavy() -> None:
    code = (
        "import sys, demuxlab.runpoint_lean, demuxlab.cluster.run, demuxlab.launch.sim;"
        "heavy = {'numpy', 'scipy', 'jsonschema', 'yaml', 'click', 'sqlalchemy'} & set(sys.modules);"
        "print(','.join(sorted(heavy)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


@pytest.mark.parametrize("n", [1, 2, 3, 60])
def test_sim_statistics_equal_steady_state(n: int) -> None:
    series = [1234.0] * n
    assert SimLauncher().steady_stats(series) == steady_state(series).to_json()


def test_sim_run_writes_the_record_and_counts_its_cpu(
    checked: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec_path, out = checked
    monkeypatch.setenv("DEMUXLAB_LEASE_DIR", str(tmp_path / "leases"))
    sim = tmp_path / "sim.json"
    sim.write_text('{"simulated": {"pairs": 2}}')
    spec = load_spec(spec_path)
    point, repeat = run_order(spec)[0]
    rid = run_id(spec, point, repeat)
    record_path = tmp_path / "results" / "lean" / "runs" / f"{rid}.json"
    argv = [
        str(out), "--run-id", rid, "--point-key", point.point_key, "--repeat", str(repeat),
        "--out", str(record_path), "--launcher", "sim", "--pairs-from", str(sim),
        "--cluster-state", str(tmp_path / "results" / "cluster"), "--git-rev", "rev1",
    ]  # fmt: skip
    assert main(argv) == 0
    record = json.loads(record_path.read_text())
    assert record["run_id"] == rid and record["status"] == "ok"
    assert record["experiment"]["spec_sha256"] == spec.sha256 and record["experiment"]["git_rev"] == "rev1"
    assert record["experiment"]["spec_text"] == SPEC
    assert record["stats"]["stationary"] is None  # 0.2 s: one sample
    assert record["host_pair"] in ("sim-000", "sim-001")
    # The run process's own CPU, start-up included (here the test process's): positive, in seconds, and no
    # more than this process has used by now (not its children's, not a clock's).
    use = resource.getrusage(resource.RUSAGE_SELF)
    assert 0 < record["scheduling"]["runner_cpu_s"] <= use.ru_utime + use.ru_stime + 0.001


def test_bad_checked_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "checked.json"
    bad.write_text("{}")
    proc = subprocess.run(
        [sys.executable, "-m", "demuxlab.runpoint_lean", str(bad), "--run-id", "x", "--point-key", "k",
         "--repeat", "0", "--out", str(tmp_path / "r.json"), "--pairs-from", "x"],
        capture_output=True, text=True, check=False, env={**os.environ},
    )  # fmt: skip
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [
        f"demuxlab: error: {bad}: format: not a demuxlab.checked/1 document"
    ]
