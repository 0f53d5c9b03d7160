"""The parts of the slurm profile that need no Slurm: constraint counting, time limits, node health and
quarantine (without draining), the retry's exclusions, adopted records. (Against a real Slurm:
tests/slurm/.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from demuxlab.errors import ConfigError
from demuxlab.slurm import nodes as health
from demuxlab.slurm.check import SlurmSettings, minutes, nodes_satisfying, parse_max_time
from demuxlab.slurm.job import restore_adopted
from demuxlab.slurm.lanes import auto_group_runs, group_time_limit_min

FEATURES = {
    "a1": ("tbclass1", "ib"),
    "a2": ("tbclass1",),
    "b1": ("tbclass2", "ib"),
    "b2": ("tbclass2", "ib"),
    "b3": ("tbclass2",),
    "c1": (),
}


@pytest.mark.parametrize(
    ("expr", "nodes"),
    [
        ("", ["a1", "a2", "b1", "b2", "b3", "c1"]),
        ("tbclass1", ["a1", "a2"]),
        ("ib", ["a1", "b1", "b2"]),
        ("tbclass1&ib", ["a1"]),
        ("tbclass1|tbclass2", ["a1", "a2", "b1", "b2", "b3"]),
        ("(tbclass1|tbclass2)&ib", ["a1", "b1", "b2"]),
        # Matching OR: every node of the job has the same one of the options; the larger group counts.
        ("[tbclass1|tbclass2]", ["b1", "b2", "b3"]),
        ("ib&[tbclass1|tbclass2]", ["b1", "b2"]),
        ("nosuch", []),
    ],
)
def test_nodes_satisfying(expr: str, nodes: list[str]) -> None:
    assert sorted(nodes_satisfying(expr, FEATURES)) == nodes


@pytest.mark.parametrize("expr", ["a&", "(a|b", "a)|b", "&a"])
def test_bad_constraint_is_one_line(expr: str) -> None:
    with pytest.raises(ConfigError, match=r"^slurm\.constraint: "):
        nodes_satisfying(expr, FEATURES)


@pytest.mark.parametrize(
    ("text", "minutes_"),
    [
        ("UNLIMITED", None),
        ("1", 1),
        ("30", 30),
        ("1:30", 2),
        ("2:00:00", 120),
        ("1-00:00:00", 1440),
        ("1-2", 1560),
    ],
)
def test_parse_max_time(text: str, minutes_: int | None) -> None:
    assert parse_max_time(text) == minutes_


def test_time_limit_in_minutes() -> None:
    assert minutes(1.5 + 300) == 6
    assert minutes(0) == 1
    assert minutes(120) == 2


def test_full_constraint() -> None:
    assert SlurmSettings().full_constraint() == ""
    assert SlurmSettings(constraint="ib").full_constraint() == "ib"
    assert SlurmSettings(constraint="a|b").full_constraint() == "(a|b)"
    assert SlurmSettings(classes=("x", "y")).full_constraint() == "[x|y]"
    assert SlurmSettings(constraint="ib", classes=("x", "y")).full_constraint() == "ib&[x|y]"
    # A spec that pins a class asks for that class's feature instead of the matching OR.
    assert SlurmSettings(constraint="ib", classes=("x", "y")).full_constraint("y") == "ib&y"


def test_settings_from_config_take_strings() -> None:
    s = SlurmSettings.from_config(
        {"time_margin_s": "120", "pairs": "4", "classes": ["a"], "partition": "demux"}
    )
    assert (s.time_margin_s, s.pairs, s.classes, s.partition) == (120.0, 4, ("a",), "demux")


def test_quarantine_without_drain(tmp_path: Path) -> None:
    said: list[str] = []
    for i in range(3):
        said += health.record_outcome(tmp_path, ["n1", "n2"], f"r{i}", False, "client stalled", 3, False)
    assert len(said) == 2 and all("excluded from the sweep" in line for line in said)
    assert sorted(health.quarantined(tmp_path)) == ["n1", "n2"]
    st = health.read_node(tmp_path, "n1")
    assert (
        st.quarantined
        and not st.drained
        and st.failed == 3
        and "client stalled" in (st.quarantine_reason or "")
    )
    # A success resets a healthy node's count; the quarantine stays until unquarantined.
    health.record_outcome(tmp_path, ["n1", "n3"], "r9", True, None, 3, False)
    assert health.read_node(tmp_path, "n1").consecutive_failures == 0
    assert health.read_node(tmp_path, "n1").quarantined
    health.unquarantine(tmp_path, "n1")
    assert sorted(health.quarantined(tmp_path)) == ["n2"]


def test_retry_excludes_the_nodes_it_failed_on(tmp_path: Path) -> None:
    usable = ["n1", "n2", "n3", "n4"]
    assert health.retry_excludes(tmp_path, "run", usable) == []
    health.start_attempt(tmp_path, "run", {"attempt": 1, "job_id": 7, "nodes": ["n1", "n2"]})
    health.finish_attempt(tmp_path, "run", 7, "failed", "boom")
    assert health.retry_excludes(tmp_path, "run", usable) == ["n1", "n2"]
    # Another failure on n3+n4: nothing else is left, so the retry may go back anywhere.
    health.start_attempt(tmp_path, "run", {"attempt": 2, "job_id": 8, "nodes": ["n3", "n4"]})
    health.finish_attempt(tmp_path, "run", 8, "died", "NODE_FAIL")
    assert health.retry_excludes(tmp_path, "run", usable) == []
    attempts = health.read_attempts(tmp_path, "run")
    assert [a["outcome"] for a in attempts] == ["failed", "died"]


def test_retry_excludes_quarantined_but_never_every_node(tmp_path: Path) -> None:
    for i in range(2):
        health.record_outcome(tmp_path, ["n1"], f"r{i}", False, "x", 2, False)
    assert health.retry_excludes(tmp_path, "other", ["n1", "n2", "n3"]) == ["n1"]
    for i in range(2):
        health.record_outcome(tmp_path, ["n2"], f"s{i}", False, "x", 2, False)
    # One usable node left: no exclusion (Slurm holds drained nodes back itself); the runs wait.
    assert health.retry_excludes(tmp_path, "other", ["n1", "n2", "n3"]) == []


def test_restore_adopted_only_a_final_record_of_the_run(tmp_path: Path) -> None:
    out = tmp_path / "results" / "e" / "runs" / "rid.json"
    assert not restore_adopted(tmp_path, "rid", out)
    spool = tmp_path / "records" / "rid.json"
    spool.parent.mkdir(parents=True)
    spool.write_text(json.dumps({"run_id": "other", "status": "ok"}))
    assert not restore_adopted(tmp_path, "rid", out)
    spool.write_text(json.dumps({"run_id": "rid", "status": "ok", "slurm": {"job_id": 12}}))
    assert restore_adopted(tmp_path, "rid", out)
    assert json.loads(out.read_text())["slurm"]["job_id"] == 12


def test_group_time_limit_is_k_runs_plus_the_margin() -> None:
    # 60 s runs, 30 s slack each, 300 s margin: the first run's share 390 s (7 min), the others' 90 s (2 min).
    assert group_time_limit_min(1, 60, 30, 300) == 7
    assert group_time_limit_min(4, 60, 30, 300) == 7 + 3 * 2
    assert group_time_limit_min(4, 60, 30, 300) * 60 >= 4 * (60 + 30) + 300


@pytest.mark.parametrize(
    ("run_s", "max_time", "k"),
    [
        (60, None, 40),  # an hour of 90-s runs, the partition unlimited
        (60, 30, 12),  # 7 + 11 x 2 = 29 min fit in 30, 7 + 12 x 2 = 31 do not
        (300, None, 10),  # seed 000's 5-minute runs: 330 s each, an hour
        (3600, 60, 1),  # not even one run fits: 1 (the settings' check names the partition)
    ],
)
def test_auto_group_runs_fit_the_partition(run_s: float, max_time: int | None, k: int) -> None:
    assert auto_group_runs(run_s, 30, 300, max_time) == k
    if k > 1 and max_time is not None:
        assert (
            group_time_limit_min(k, run_s, 30, 300) <= max_time < group_time_limit_min(k + 1, run_s, 30, 300)
        )


def test_group_runs_setting_is_one_line() -> None:
    assert SlurmSettings.from_config({"group_runs": "4"}).group_runs == 4
    assert SlurmSettings.from_config({}).group_runs == 0
    for bad in ("x", "-1", "2.5", True):
        with pytest.raises(ConfigError, match=r"^slurm\.group_runs: .*: a whole number of runs per job"):
            SlurmSettings.from_config({"group_runs": bad})


def test_group_excludes_are_every_run_s(tmp_path: Path) -> None:
    usable = ["n1", "n2", "n3", "n4", "n5", "n6"]
    health.start_attempt(tmp_path, "a", {"attempt": 1, "job_id": 7, "group": "g", "nodes": ["n1", "n2"]})
    health.finish_attempt(tmp_path, "a", 7, "ok", None)
    health.start_attempt(tmp_path, "b", {"attempt": 1, "job_id": 7, "group": "g", "nodes": ["n1", "n2"]})
    health.finish_attempt(tmp_path, "b", 7, "died", "NODE_FAIL")
    health.start_attempt(tmp_path, "c", {"attempt": 1, "job_id": 5, "group": "h", "nodes": ["n3", "n4"]})
    health.finish_attempt(tmp_path, "c", 5, "failed", "boom")
    assert health.group_excludes(tmp_path, ["a"], usable) == []
    assert health.group_excludes(tmp_path, ["a", "b"], usable) == ["n1", "n2"]
    assert health.group_excludes(tmp_path, ["a", "b", "c"], usable) == ["n1", "n2", "n3", "n4"]


def test_progress_shows_groups_and_their_runs(tmp_path: Path) -> None:
    from demuxlab.slurm.progress import format_progress, group_rows

    for run, outcome in (("a", "ok"), ("b", "ok"), ("c", None)):
        health.start_attempt(
            tmp_path, run, {"attempt": 1, "job_id": 7, "group": "lane-e-r0-l0-g0", "nodes": ["n1", "n2"]}
        )
        if outcome:
            health.finish_attempt(tmp_path, run, 7, outcome, None)
    health.start_attempt(
        tmp_path, "d", {"attempt": 1, "job_id": 8, "group": "lane-e-r0-l1-g0", "nodes": ["n3", "n4"]}
    )
    health.finish_attempt(tmp_path, "d", 8, "died", "NODE_FAIL")
    rows = group_rows(tmp_path)
    assert rows == [
        {
            "group": "lane-e-r0-l0-g0",
            "jobs": [7],
            "nodes": ["n1", "n2"],
            "runs_done": 2,
            "runs_failed": 0,
            "running": "c",
        },
        {
            "group": "lane-e-r0-l1-g0",
            "jobs": [8],
            "nodes": ["n3", "n4"],
            "runs_done": 0,
            "runs_failed": 1,
            "running": None,
        },
    ]
    text = format_progress({"partitions": [], "groups": rows, "nodes": [], "runs": {}})
    assert "lane-e-r0-l0-g0" in text and "c" in text.splitlines()[-2]


def test_live_jobs_name_runs_and_groups() -> None:
    from demuxlab.slurm.adopt import parse_live_jobs

    here = "/w"
    out = "\n".join(
        [
            "11|rule_run_point_wildcards_exp_0a1b|/w",
            "12|rule_lane-exp-r0-l1-g2_run_point|/w",
            "13|rule_lane-exp-r0-l0-g0_run_point|/elsewhere",
            "14|rule_plan_wildcards_exp|/w",
        ]
    )
    assert parse_live_jobs(out, here) == {"0a1b": 11, "lane-exp-r0-l1-g2": 12}
