"""The workflow's model stages against a real database: calibrate, predict, validate (demuxlab.validation).

The runs are synthetic run records (the ingest test template) for the points of a real spec, loaded by
the real ingest; their server timings are known, so the fitted rates and the errors can be checked.
"""

from __future__ import annotations

import copy
import csv
import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from demuxlab.cli.model import model
from demuxlab.ctmc.predict import predict
from demuxlab.ctmc.rates import Host, Rates, calibration_threads
from demuxlab.errors import DemuxlabError
from demuxlab.ingest import ingest_files
from demuxlab.spec import Point, Spec, load_spec, run_id, run_order
from demuxlab.validation import calibrate_experiment, predict_experiment, validation_rows, write_validation
from helpers.ctmc_runs import server_json

pytestmark = pytest.mark.postgres

TEMPLATE = Path(__file__).resolve().parents[1] / "db" / "data" / "run_record.json"
SPEC = """\
name: val
reproduces: none
repeats: 2
calibration: {repeats: 1}
designs:
  - {pattern: hsha, notifiers: [epoll-lt], threads: [2, 3]}
  - {pattern: lf, notifiers: [epoll-lt, poll], threads: [1, 2]}
  - {pattern: reactor, notifiers: [epoll-lt], threads: [1]}
matrix:
  threads: [1]
  work_us: [10]
  connections: [3]
  msg_size: [1]
"""
# Per-message service times (µs) of the instrumented runs; notify: τ_e µs per returned descriptor.
TRUE_US = {"lock": 0.05, "queue_put": 0.3, "queue_get": 0.4, "recv": 6.0, "send": 2.0, "rearm": 0.5}
TAU_E_US = 1.5


def measured(point: Point, repeat: int) -> float:
    """A throughput per run: grows with threads, differs by repeat."""
    return 40_000.0 + 10_000.0 * point.threads + 500.0 * repeat


def self_consistent(server: dict[str, Any], client: dict[str, Any], point: Point, cores: int) -> float:
    """What the calibration of this run predicts for the run itself: the self-check then passes."""
    from demuxlab.ctmc.calibrate import calibrate, self_check

    kw: dict[str, Any] = {"clients": [client], "client_cores": [cores]}
    rates = calibrate([server], point.pattern, connections=[point.connections], **kw)
    (check,) = self_check(rates, point.pattern, [server], [1.0], [point.connections], **kw)
    return check.predicted_msgs_per_s


def plain_of(server: dict[str, Any]) -> dict[str, Any]:
    """The plain run of an instrumented one's point: no timings, the same CPU times."""
    res = copy.deepcopy(server)
    res.update(instrument=False, ops={})
    res.pop("events_per_call", None)
    res.pop("notify_by_events", None)
    for t in res["threads_detail"]:
        t.pop("idle_s", None)
        t.pop("notify_s", None)
    return res


def set_throughput(rec: dict[str, Any], tput: float) -> None:
    """An ok record of throughput ``tput``: its samples scaled so that their mean is ``tput`` (ingest
    refuses an ok record whose throughput is not its samples')."""
    samples = rec["client"]["per_second"]
    rec["client"]["per_second"] = [x * tput / (sum(samples) / len(samples)) for x in samples]
    rec["stats"]["throughput_msgs_per_s"] = tput
    rec["client"]["throughput_msgs_per_s"] = tput


def record(spec: Spec, point: Point, repeat: int, status: str = "ok", slow: float = 1.0) -> dict[str, Any]:
    rec: dict[str, Any] = copy.deepcopy(json.loads(TEMPLATE.read_text()))
    rec["experiment"].update(name=spec.name, spec_sha256=spec.sha256, spec_text=spec.text)
    rec["point"] = point.to_json()
    rec["repeat"] = repeat
    rec["run_id"] = run_id(spec, point, repeat)
    rec["pinning"]["client_cpus"] = [0]
    # A plain run at a calibration point's setting is its twin (issue 43: the calibration's speed and
    # self-check): the same server without the timings.
    twin = not point.instrument and point.threads == calibration_threads(point.pattern)
    if point.instrument or twin:
        # Known service times (``slow`` × TRUE_US), each thread on a CPU of its own.
        us = {k: v * slow for k, v in TRUE_US.items()}
        server = server_json(point.pattern, TAU_E_US * slow, 100, true_us=us, work_us=point.work_us)
        server.update(notifier=point.notifier, threads=point.threads, connections_accepted=point.connections)
    else:
        server = rec["server"]
        server.update(pattern=point.pattern, notifier=point.notifier, threads=point.threads, instrument=False)
        server["ops"] = {}
        server["notify_by_events"] = []
    rec["client"]["threads"] = point.client_threads
    # A calibration run (and its plain twin) measures what its own rates predict (the self-check passes);
    # the others vary.
    tput = (
        self_consistent(server, rec["client"], point, 1)
        if point.instrument or twin
        else measured(point, repeat) * slow
    )
    rec["server"] = plain_of(server) if twin else server
    set_throughput(rec, tput)
    if status == "failed":
        rec.update(status="failed", failure_reason="demux-client: stalled", client=None, stats=None)
    return rec


@pytest.fixture
def spec(tmp_path: Path) -> Spec:
    path = tmp_path / "val.yaml"
    path.write_text(SPEC)
    return load_spec(path)


def ingest_spec(spec: Spec, tmp_path: Path, failed: frozenset[str] = frozenset()) -> None:
    paths = []
    for i, (point, repeat) in enumerate(run_order(spec)):
        bad = point.instrument and point.notifier in failed
        path = tmp_path / f"rec{i}.json"
        path.write_text(json.dumps(record(spec, point, repeat, "failed" if bad else "ok")))
        paths.append(path)
    ingest_files(paths)


def test_calibrate_predict_validate(spec: Spec, tmp_path: Path, database_url: str) -> None:
    ingest_spec(spec, tmp_path, failed=frozenset({"poll"}))

    outcomes = {(o.pattern, o.notifier): o for o in calibrate_experiment(spec)}
    # Every pattern is calibrated: the reactor too (issue 19).
    assert set(outcomes) == {
        ("hsha", "epoll-lt"),
        ("lf", "epoll-lt"),
        ("lf", "poll"),
        ("reactor", "epoll-lt"),
    }
    assert outcomes[("lf", "poll")].calibration_id is None
    assert outcomes[("lf", "poll")].error == "no successful calibration run (1 failed)"
    hsha = outcomes[("hsha", "epoll-lt")]
    assert hsha.calibration_id is not None and hsha.rates is not None
    assert hsha.rates["r_i"] == pytest.approx(1 / TRUE_US["recv"])
    assert hsha.rates["r_e"] == pytest.approx(1 / TAU_E_US)
    assert len(hsha.source_runs) == 1
    # Stored with provenance: source runs, the server host and the binary.
    engine = sa.create_engine(database_url)
    with engine.connect() as conn:
        cal = (
            conn.execute(sa.text("select * from calibrations where id = :i"), {"i": hsha.calibration_id})
            .one()
            ._mapping
        )
        host = conn.execute(
            sa.text("select hostname from hosts where id = :i"), {"i": cal["host_id"]}
        ).scalar()
    assert cal["source_runs"] == hsha.source_runs and host == "node-a"
    assert cal["artifacts"]["server_artifacts"][0]["sha256"].startswith("0d5e1a4f")
    assert cal["rates"]["speed"] == pytest.approx(1.0) and cal["rates"]["source"]["r_z"].startswith("client")
    # Calibrating again updates the same rows: predictions keep referring to them.
    again = {(o.pattern, o.notifier): o.calibration_id for o in calibrate_experiment(spec)}
    assert again[("hsha", "epoll-lt")] == hsha.calibration_id

    assert all(o.hardware_class is None for o in outcomes.values())  # a local sweep: one class, none
    ids = {(*k, None): o.calibration_id for k, o in outcomes.items() if o.calibration_id is not None}
    entries = predict_experiment(spec, ids, method="exact")
    stored = [e for e in entries if "skipped" not in e]
    skipped = [e for e in entries if "skipped" in e]
    # hsha t2, t3; lf/epoll-lt t1, t2; lf/poll t1, t2; reactor t1: all from the paper's rates, 5 also
    # calibrated.
    assert len(stored) == 7 + 5
    assert {e["point_key"] for e in skipped} == {
        "lf/poll/t1/w10/c3/b1/ct1/rclosed",
        "lf/poll/t2/w10/c3/b1/ct1/rclosed",
    }
    assert all(e["skipped"] == "no calibration of lf/poll" for e in skipped)
    assert not any(e["point_key"].endswith("/instr") for e in entries)
    assert {e["point_key"] for e in stored if e["rates_source"] == "calibration"} >= {
        "reactor/epoll-lt/t1/w10/c3/b1/ct1/rclosed"
    }
    lf_rates = Rates.from_dict({**outcomes[("lf", "epoll-lt")].rates})  # type: ignore[arg-type]
    # On the runs' host: the server's 4 CPUs (the template's pinning), the client's one thread and CPU.
    host = Host(cores=4, client_threads=1, client_cores=1)
    expect = predict(
        "lf", 2, 10.0, method="exact", connections=3, rates=lf_rates, host=host
    ).throughput_msgs_per_s
    got = next(
        e
        for e in stored
        if e["point_key"].startswith("lf/epoll-lt/t2/") and e["rates_source"] == "calibration"
    )
    assert got["throughput_msgs_per_s"] == pytest.approx(expect)

    # Predicting again replaces the rows (one per point, source and method).
    predict_experiment(spec, ids, method="exact")
    with engine.connect() as conn:
        n = conn.execute(sa.text("select count(*) from predictions")).scalar()
    engine.dispose()
    assert n == 12

    rows = {r["point_key"]: r for r in validation_rows(spec, method="exact")}
    assert len(rows) == 7
    row = rows["hsha/epoll-lt/t3/w10/c3/b1/ct1/rclosed"]
    mean = (measured_of(spec, row["point_key"], 0) + measured_of(spec, row["point_key"], 1)) / 2
    assert row["measured_msgs_per_s"] == pytest.approx(mean)
    assert row["paper_rel_error"] == pytest.approx((row["paper_msgs_per_s"] - mean) / mean)
    assert row["calibration_rel_error"] == pytest.approx((row["calibration_msgs_per_s"] - mean) / mean)
    assert rows["lf/poll/t1/w10/c3/b1/ct1/rclosed"]["calibration_msgs_per_s"] is None

    # The claims' recommendation ranks every predicted design, the reactor's too (model_best, disagreements).
    from demuxlab.claims.db import load_inputs
    from demuxlab.claims.recommendation import recommend

    inputs = load_inputs(spec.name, spec.sha256, "exact")
    assert {q["point_key"].split("/")[0] for q in inputs.predictions} == {"hsha", "lf", "reactor"}
    (rec,) = recommend(inputs.points, inputs.predictions)
    assert rec.model_best is not None and rec.candidates == 7

    paths = write_validation(spec, tmp_path / "report", method="exact")
    with paths[0].open() as f:
        table = list(csv.DictReader(f))
    assert len(table) == 7 and table[0]["paper_rel_error"] != ""
    assert all(r["hardware_class"] == "" for r in table)  # the class column, empty for a local sweep
    with paths[1].open() as f:
        summary = {(r["pattern"], r["notifier"], r["rates_source"]): r for r in csv.DictReader(f)}
    assert int(summary[("lf", "epoll-lt", "calibration")]["points"]) == 2
    assert ("lf", "poll", "calibration") not in summary
    assert paths[2].read_bytes().startswith(b"\x89PNG")


TWO_CLASSES = SPEC.replace("repeats: 2", "repeats: 4").replace(
    "calibration: {repeats: 1}", "calibration: {repeats: 2}"
)


def classed_record(spec: Spec, point: Point, repeat: int) -> dict[str, Any]:
    """Repeats 0-1 on class hw-a, 2-3 on hw-b (calibration repeat 0 on hw-a, 1 on hw-b); hw-b's server
    takes twice as long per operation and measures twice the throughput of hw-a."""
    slow = repeat >= (1 if point.instrument else 2)
    rec = record(spec, point, repeat, slow=2.0 if slow else 1.0)
    rec["pair"] = {
        "name": "pair-b" if slow else "pair-a",
        "hardware_class": {"id": "hw-b" if slow else "hw-a"},
    }
    return rec


def test_two_hardware_classes_are_never_averaged(tmp_path: Path, database_url: str) -> None:
    path = tmp_path / "val.yaml"
    path.write_text(TWO_CLASSES)
    spec = load_spec(path)
    paths = []
    for i, (point, repeat) in enumerate(run_order(spec)):
        paths.append(tmp_path / f"rec{i}.json")
        paths[-1].write_text(json.dumps(classed_record(spec, point, repeat)))
    ingest_files(paths)

    outcomes = calibrate_experiment(spec)
    by_key = {(o.pattern, o.notifier, o.hardware_class): o for o in outcomes}
    assert set(by_key) == {
        (p, n, c)
        for p, n in [("hsha", "epoll-lt"), ("lf", "epoll-lt"), ("lf", "poll"), ("reactor", "epoll-lt")]
        for c in ("hw-a", "hw-b")
    }
    a, b = by_key[("hsha", "epoll-lt", "hw-a")], by_key[("hsha", "epoll-lt", "hw-b")]
    assert a.rates is not None and b.rates is not None
    assert a.rates["r_i"] == pytest.approx(1 / TRUE_US["recv"])  # each class from its own runs only
    assert b.rates["r_i"] == pytest.approx(1 / (2 * TRUE_US["recv"]))
    ids = {k: o.calibration_id for k, o in by_key.items() if o.calibration_id is not None}
    assert len(ids) == 8
    entries = predict_experiment(spec, ids, method="exact")
    calibrated = [e for e in entries if e["rates_source"] == "calibration"]
    assert {e["hardware_class"] for e in calibrated} == {"hw-a", "hw-b"} and len(calibrated) == 14

    rows = validation_rows(spec, method="exact")
    assert len(rows) == 14  # 7 points × 2 classes, never one averaged row
    key = "hsha/epoll-lt/t3/w10/c3/b1/ct1/rclosed"
    mine = {r["hardware_class"]: r for r in rows if r["point_key"] == key}
    assert set(mine) == {"hw-a", "hw-b"}
    point = next(p for p, _ in run_order(spec) if p.point_key == key)
    assert mine["hw-a"]["measured_msgs_per_s"] == pytest.approx((measured(point, 0) + measured(point, 1)) / 2)
    assert mine["hw-b"]["measured_msgs_per_s"] == pytest.approx(measured(point, 2) + measured(point, 3))
    assert mine["hw-a"]["runs_ok"] == mine["hw-b"]["runs_ok"] == 2
    assert mine["hw-a"]["calibration_id"] == ids[("hsha", "epoll-lt", "hw-a")]
    assert mine["hw-b"]["calibration_id"] == ids[("hsha", "epoll-lt", "hw-b")]
    assert mine["hw-a"]["calibration_msgs_per_s"] != pytest.approx(mine["hw-b"]["calibration_msgs_per_s"])
    assert mine["hw-a"]["paper_msgs_per_s"] == mine["hw-b"]["paper_msgs_per_s"]  # the paper's: one machine

    out = write_validation(spec, tmp_path / "report", method="exact")
    with out[1].open() as f:
        summary = list(csv.DictReader(f))
    hsha = [r for r in summary if (r["pattern"], r["rates_source"]) == ("hsha", "calibration")]
    assert sorted(r["hardware_class"] for r in hsha) == ["hw-a", "hw-b"]
    assert all(int(r["points"]) == 2 for r in hsha)

    # The claims' inputs: a point row per class (its host is the class), each class's calibration its own.
    from demuxlab.claims.db import load_inputs

    inputs = load_inputs(spec.name, spec.sha256, "exact")
    claim_pts = {p["host"]: p for p in inputs.points if p["point_key"] == key}
    assert set(claim_pts) == {"hw-a", "hw-b"} and claim_pts["hw-b"]["n"] == 2
    assert claim_pts["hw-b"]["mean"] == pytest.approx(mine["hw-b"]["measured_msgs_per_s"])
    cal_preds = [q for q in inputs.predictions if q["point_key"] == key and q["source"] == "calibration"]
    assert sorted(q["host"] for q in cal_preds) == ["hw-a", "hw-b"]
    assert set(inputs.facts) == {"hw-a", "hw-b"}

    # The dashboard's data layer: a row per point × class, never one averaged row.
    from demuxlab.dashboard import data
    from demuxlab.dashboard.data import points as point_data
    from demuxlab.dashboard.figures.summary import summarise

    engine = sa.create_engine(database_url)
    with engine.connect() as conn:
        exp = data.resolve_experiment(conn, spec.name)
        pts = summarise(point_data.measured(conn, exp))
        dash_preds = point_data.predictions(conn, exp)
    engine.dispose()
    dash = pts[pts["point_key"] == key].set_index("hardware_class")
    assert sorted(dash.index) == ["hw-a", "hw-b"]
    assert dash.loc["hw-b", "mean"] == pytest.approx(mine["hw-b"]["measured_msgs_per_s"])
    assert set(dash_preds[dash_preds["source"] == "calibration"]["hardware_class"]) == {"hw-a", "hw-b"}


def measured_of(spec: Spec, point_key: str, repeat: int) -> float:
    point = next(p for p, _ in run_order(spec) if p.point_key == point_key)
    return measured(point, repeat)


def test_zero_work_points_are_predicted(tmp_path: Path, database_url: str) -> None:
    """Work 0 (seed 002's and 003's echo): the work step is instant, the rest of the cycle is modelled."""
    path = tmp_path / "val.yaml"
    path.write_text(SPEC.replace("work_us: [10]", "work_us: [0]").replace("repeats: 1", "repeats: 0"))
    spec = load_spec(path)
    ingest_spec(spec, tmp_path)
    entries = predict_experiment(spec, {}, method="exact")
    paper = [e for e in entries if e["rates_source"] == "paper"]
    assert len(paper) == 7 and not any("skipped" in e for e in paper)
    assert all(e["throughput_msgs_per_s"] > 0 for e in paper)


def test_stages_before_ingest_name_the_experiment(spec: Spec, tmp_path: Path, database_url: str) -> None:
    with pytest.raises(DemuxlabError, match=r"'val'.*ingest first"):
        calibrate_experiment(spec)
    with pytest.raises(DemuxlabError, match=r"'val'.*ingest first"):
        predict_experiment(spec, {})
    # Without calibration runs there is nothing to fit: no database access (the workflow runs the stage
    # before any run of the experiment is ingested).
    path = tmp_path / "nocal.yaml"
    path.write_text(SPEC.replace("name: val", "name: nocal").replace("repeats: 1", "repeats: 0"))
    assert calibrate_experiment(load_spec(path)) == []


def test_cli_stages(spec: Spec, tmp_path: Path, database_url: str) -> None:
    ingest_spec(spec, tmp_path)
    spec_file = spec.path
    cal = tmp_path / "model" / "calibrations.json"
    res = CliRunner().invoke(model, ["calibrate-experiment", spec_file, "--out", str(cal)])
    assert res.exit_code == 0, res.output
    doc = json.loads(cal.read_text())
    assert doc["spec_sha256"] == spec.sha256 and len(doc["calibrations"]) == 4
    preds = tmp_path / "model" / "predictions.json"
    args = ["predict-experiment", spec_file, "--calibrations", str(cal), "--out", str(preds)]
    res = CliRunner().invoke(model, [*args, "--method", "exact"])
    assert res.exit_code == 0, res.output
    assert sum("skipped" not in e for e in json.loads(preds.read_text())["predictions"]) == 14
    res = CliRunner().invoke(
        model, ["validate-experiment", spec_file, "--out-dir", str(tmp_path / "r"), "--method", "exact"]
    )
    assert res.exit_code == 0, res.output
    assert (tmp_path / "r" / "validation.png").is_file()

    # A calibrations file of another spec version is refused by name.
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**doc, "spec_sha256": "0" * 64}))
    res = CliRunner().invoke(
        model, ["predict-experiment", spec_file, "--calibrations", str(other), "--out", "x"]
    )
    assert isinstance(res.exception, DemuxlabError) and "other.json: spec_sha256" in str(res.exception)
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    res = CliRunner().invoke(
        model, ["predict-experiment", spec_file, "--calibrations", str(broken), "--out", "x"]
    )
    assert isinstance(res.exception, DemuxlabError) and "broken.json" in str(res.exception)
