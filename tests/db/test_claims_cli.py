"""``demuxlab claims`` on a real PostgreSQL: synthetic run records of a spec, loaded by the real ingest,
become claims.csv, recommendations.csv and claims.md with verdicts that follow from the throughputs."""

from __future__ import annotations

import copy
import csv
import json
from pathlib import Path
from typing import Any

import pytest

from demuxlab.cli import main
from demuxlab.ingest import ingest_files
from demuxlab.spec import Point, Spec, load_spec, run_id, run_order

pytestmark = pytest.mark.postgres

TEMPLATE = Path(__file__).parent / "data" / "run_record.json"
SPEC = """\
name: clm
reproduces: none
repeats: 3
calibration: {repeats: 0}
designs:
  - {pattern: hsha, notifiers: [select, epoll-lt], threads: [2, 3]}
  - {pattern: reactor, notifiers: [select, poll], threads: [1]}
matrix:
  threads: [1]
  work_us: [0]
  connections: [64]
  msg_size: [1]
"""
# Mean throughput per point (msg/s); each repeat differs by 0.1 %.
THROUGHPUT = {
    ("hsha", "select", 2): 50_000.0,
    ("hsha", "select", 3): 100_000.0,
    ("hsha", "epoll-lt", 2): 50_000.0,
    ("hsha", "epoll-lt", 3): 80_000.0,
    ("reactor", "select", 1): 90_000.0,
}


def record(spec: Spec, point: Point, repeat: int) -> dict[str, Any]:
    rec: dict[str, Any] = copy.deepcopy(json.loads(TEMPLATE.read_text()))
    rec["experiment"].update(name=spec.name, spec_sha256=spec.sha256, spec_text=spec.text)
    rec["point"] = point.to_json()
    rec["repeat"] = repeat
    rec["run_id"] = run_id(spec, point, repeat)
    rec["server"].update(pattern=point.pattern, notifier=point.notifier, threads=point.threads)
    if point.pattern == "reactor" and point.notifier == "poll":  # every run of this point failed
        rec.update(status="failed", failure_reason="demux-client: stalled", client=None, stats=None)
        return rec
    tput = THROUGHPUT[(point.pattern, point.notifier, point.threads)] * (1 + 0.001 * repeat)
    # Samples scaled to the throughput: ingest refuses an ok record whose throughput is not its samples'.
    samples = rec["client"]["per_second"]
    rec["client"]["per_second"] = [x * tput / (sum(samples) / len(samples)) for x in samples]
    rec["stats"]["throughput_msgs_per_s"] = tput
    rec["client"]["throughput_msgs_per_s"] = tput
    return rec


def test_claims_command_writes_verdicts_and_recommendation(tmp_path: Path, database_url: str) -> None:
    spec_path = tmp_path / "clm.yaml"
    spec_path.write_text(SPEC)
    spec = load_spec(spec_path)
    paths = []
    for i, (point, repeat) in enumerate(run_order(spec)):
        path = tmp_path / f"rec{i}.json"
        path.write_text(json.dumps(record(spec, point, repeat)))
        paths.append(path)
    ingest_files(paths)

    out = tmp_path / "report"
    main(["claims", str(spec_path), "--out-dir", str(out)])

    with (out / "claims.csv").open() as f:
        claims = {row["claim_id"]: row for row in csv.DictReader(f)}
    assert len(claims) == 10
    assert {row["host"] for row in claims.values()} == {"node-a"}
    assert claims["S0.hsha-epoll-lt-worse"]["verdict"] == "holds"
    assert (
        "hsha/epoll-lt t3: 80.08k msg/s [79.88k, 80.28k], n=3" in claims["S0.hsha-epoll-lt-worse"]["evidence"]
    )
    assert claims["S2.wrong-architecture"]["verdict"] == "holds"  # reactor 90k > HSHA t2 50k
    assert claims["S1.model-peak-trend"]["verdict"] == "not testable"
    assert claims["S3.emulated-proactor"]["verdict"] == "not testable"
    assert "4 cores" in claims["S0.notifier-2x"]["hardware"]

    with (out / "recommendations.csv").open() as f:
        (rec,) = list(csv.DictReader(f))
    assert (rec["pattern"], rec["notifier"], rec["threads"]) == ("hsha", "select", "3")
    assert float(rec["ci_low"]) < float(rec["mean"]) < float(rec["ci_high"])
    assert rec["n"] == "3" and rec["candidates"] == "5" and rec["host"] == "node-a"

    md = (out / "claims.md").read_text()
    assert md.startswith("# Seed claims: clm")
    assert "| [S0.hsha-epoll-lt-worse](#s0hsha-epoll-lt-worse) | 000 | **holds** |" in md
    assert (
        "## Recommendation" in md
        and "| node-a | work 0 µs, 64 conns, 1 B, closed loop | hsha/select t3 |" in md
    )
    assert "left out (no successful run): reactor/poll/t1/w0/c64/b1/ct1/rclosed" in md
    check_predictions(spec_path, out, database_url)


def check_predictions(spec_path: Path, out: Path, database_url: str) -> None:
    """With stored predictions: the model claim and the recommendation's model columns, per method."""
    from sqlalchemy import select

    from demuxlab.db.engine import session
    from demuxlab.db.models import Point as PointRow
    from demuxlab.db.models import Prediction

    # HSHA over select: the paper's rates by SSA 50 % too high at 3 threads; an exact solution that
    # agrees is stored too, and must not be used with --method ssa.
    with session(database_url) as s:
        ids = {
            p.threads: p.id
            for p in s.scalars(
                select(PointRow).where(PointRow.pattern == "hsha", PointRow.notifier == "select")
            )
        }
        for method, t3 in (("ssa", 150_000.0), ("exact", 100_000.0)):
            for threads, value in ((2, 50_500.0), (3, t3)):
                s.add(
                    Prediction(
                        point_id=ids[threads],
                        calibration_id=None,
                        rates_source="paper",
                        method=method,
                        parameters={},
                        throughput_msgs_per_s=value,
                        ci_halfwidth_rel=0.01,
                    )
                )
    main(["claims", str(spec_path), "--out-dir", str(out), "--method", "ssa"])
    with (out / "claims.csv").open() as f:
        claims = {row["claim_id"]: row for row in csv.DictReader(f)}
    model = claims["S1.model-peak-trend"]
    assert model["verdict"] == "refuted", model
    assert "model peak 150k vs measured 100.1k at t3 (+49.9%)" in model["reason"]
    with (out / "recommendations.csv").open() as f:
        (rec,) = list(csv.DictReader(f))
    # Only hsha/select has predictions: the model is not judged against the other measured designs
    # (issue 43: never "agrees" among the modelled points alone), and the row says which lack one.
    assert rec["model_source"] == "paper" and rec["model_agrees"] == "", rec
    assert "hsha/epoll-lt (no paper prediction)" in rec["model_missing"], rec
    assert "reactor/select (no paper prediction)" in rec["model_missing"], rec
    assert rec["model_disagreements"].startswith("hsha/select t3: model 150k msg/s")

    main(["claims", str(spec_path), "--out-dir", str(out), "--method", "exact"])
    with (out / "claims.csv").open() as f:
        claims = {row["claim_id"]: row for row in csv.DictReader(f)}
    assert claims["S1.model-peak-trend"]["verdict"] == "holds", claims["S1.model-peak-trend"]


def test_claims_command_unknown_experiment_is_one_line(
    tmp_path: Path, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec_path = tmp_path / "clm.yaml"
    spec_path.write_text(SPEC)
    with pytest.raises(SystemExit) as exit_info:
        main(["claims", str(spec_path), "--out-dir", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("demuxlab: error: experiment 'clm' (spec ") and "ingest first" in err
    assert err.count("\n") == 1 and not (tmp_path / "out").exists()


def test_stored_refusals_give_the_calibrations_files_reasons(database_url: str) -> None:
    """A bundle's reproduce has no calibrations.json, only the refusals stored with the runs: their reasons
    must read as the workflow's (``demuxlab claims --calibrations``), or reproduce says the recommendation
    differs. One refused, one without runs, one fitted (not listed), another experiment's (not listed)."""
    from demuxlab.validation.calibration import CalibrationOutcome, calibrations_doc, missing_reasons
    from demuxlab.validation.store import refusal_reasons, save_refusal

    sha, other = "ab" * 32, "cd" * 32
    refused = CalibrationOutcome("lf", "epoll-lt", None, None, None, ["r1"], 0, "refused: … (+16.0%)")
    no_runs = CalibrationOutcome("hsha", "poll", None, None, None, [], 3, "no successful calibration run")
    fitted = CalibrationOutcome("hsha", "epoll-lt", 7, {"r_l": 1.0}, {"r_l": "paper"}, ["r2"], 0, None)
    from_file = missing_reasons(calibrations_doc("exp", sha, [refused, no_runs, fitted]), "c.json", sha)
    for o in (refused, no_runs):
        assert o.error is not None
        save_refusal(o.pattern, o.notifier, o.source_runs, experiment="exp", spec_sha256=sha, error=o.error)
    save_refusal("tpc", "none", ["r3"], experiment="x", spec_sha256=other, error="refused: elsewhere")
    assert refusal_reasons(sha, database_url) == from_file
    assert set(from_file) == {("lf", "epoll-lt"), ("hsha", "poll")}
    assert from_file[("hsha", "poll")].startswith("not calibrated: ")
