"""Experiment specs: schema, checks against the server's pairs, expansion, run order and run ids."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from demuxlab import vocab
from demuxlab.designs import Pair, load_pairs_json, valid_pairs
from demuxlab.errors import ConfigError, LaunchError, SpecError
from demuxlab.limits import limits
from demuxlab.spec import (
    RUN_NAMESPACE,
    calibration_points,
    expand_points,
    find_run,
    load_spec,
    run_id,
    run_order,
    schema,
    schema_path,
)

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
SPECS = sorted(EXPERIMENTS.glob("*.yaml"))


def contract_pairs_json() -> str:
    """The pairs CONTRACTS.md §1 promises, as ``demux-server --list`` would print them."""
    rows: list[dict[str, Any]] = []
    minimum = {"reactor": 1, "hsha": 2, "lf": 1, "proactor": 2, "multireactor": 1}
    for pattern, low in minimum.items():
        for notifier in ("select", "poll", "epoll-lt", "epoll-et", "uring"):
            high = 1 if pattern == "reactor" else 1024
            rows.append({"pattern": pattern, "notifier": notifier, "min_threads": low, "max_threads": high})
    rows.append({"pattern": "tpc", "notifier": "none", "min_threads": 1, "max_threads": 1024})
    rows.append({"pattern": "uring", "notifier": "uring", "min_threads": 1, "max_threads": 1024})
    return json.dumps(rows)


PAIRS = load_pairs_json(contract_pairs_json())

MINIMAL = """\
name: {name}
reproduces: none
designs:
  - {{pattern: hsha, notifiers: [epoll-lt, poll], threads: [2, 4]}}
  - {{pattern: reactor, notifiers: [epoll-lt]}}
matrix:
  threads: [1, 2]
  work_us: [0]
  connections: [64]
  msg_size: [1]
"""


def write(tmp_path: Path, text: str, name: str = "x") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def spec_error(path: Path, pairs: list[Pair] | None = PAIRS) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(path, pairs=pairs)
    message = info.value.message
    assert "\n" not in message
    return message


# -- the shipped specs ------------------------------------------------------------------------------------


def test_every_required_spec_is_shipped() -> None:
    names = {p.stem for p in SPECS}
    assert {
        "smoke",
        "msept12",
        "ctmc-validation",
        "embedded-multicore",
        "notifier-scaling",
        "proactor-echo",
    } <= names


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_shipped_spec_loads_and_expands(path: Path) -> None:
    spec = load_spec(path, pairs=PAIRS)
    points = expand_points(spec)
    assert points
    assert len({p.point_key for p in points}) == len(points)
    # The raw file (no defaults filled) is valid under the plain schema too, as Snakemake's validate sees it.
    jsonschema.Draft202012Validator(schema()).validate(yaml.safe_load(path.read_text()))
    # smoke checks the pipeline; adaptive-grid is the adaptive replay benchmark's grid (docs/adaptive.md).
    if spec.name not in ("smoke", "adaptive-grid"):
        assert "seed 00" in spec.reproduces
        assert spec.repeats == 5
        assert spec.phases.measure_s == 300


def test_msept12_has_the_papers_points() -> None:
    spec = load_spec(EXPERIMENTS / "msept12.yaml", pairs=PAIRS)
    points = expand_points(spec)
    hsha = sorted({p.threads for p in points if p.pattern == "hsha"})
    lf = sorted({p.threads for p in points if p.pattern == "lf"})
    assert hsha == list(range(2, 17))  # HSHA needs its monitor plus one worker
    assert lf == list(range(1, 17))
    assert {p.notifier for p in points} == {"select", "epoll-lt", "epoll-et"}
    assert {p.connections for p in points} == {512}
    assert len(points) == 3 * 15 + 3 * 16


def test_smoke_is_short_and_has_calibration_points() -> None:
    spec = load_spec(EXPERIMENTS / "smoke.yaml", pairs=PAIRS)
    points = expand_points(spec)
    per_run_s = spec.phases.warmup_s + spec.phases.measure_s + spec.phases.cooldown_s + 1.5
    assert len(points) * spec.repeats * per_run_s <= 150
    keys = {(p.pattern, p.notifier, p.threads) for p in points}
    assert ("hsha", "epoll-lt", 2) in keys and ("lf", "epoll-lt", 1) in keys
    assert len({p.pattern for p in points}) >= 4 and len({p.notifier for p in points}) >= 4
    assert max(p.threads for p in points) <= 2


def test_notifier_scaling_keeps_select_under_fd_setsize() -> None:
    spec = load_spec(EXPERIMENTS / "notifier-scaling.yaml", pairs=PAIRS)
    points = expand_points(spec)
    assert max(p.connections for p in points if p.notifier == "select") <= 1000
    assert max(p.connections for p in points if p.notifier == "epoll-et") == 10000


# -- what a spec needs -------------------------------------------------------------------------------------


def test_loading_and_checking_a_spec_imports_no_model(tmp_path: Path) -> None:
    """Issue 46: a spec is checked, expanded and ordered without the CTMC package, numpy or scipy (the
    pattern facts it needs, e.g. the calibration concurrency, are demuxlab.vocab's)."""
    pairs = tmp_path / "pairs.json"
    pairs.write_text(contract_pairs_json())
    code = (
        "import sys; from pathlib import Path;"
        "from demuxlab.designs import load_pairs_json;"
        "from demuxlab.spec import calibration_points, expand_points, load_spec, run_order;"
        f"pairs = load_pairs_json(Path({str(pairs)!r}).read_text());"
        f"spec = load_spec(Path({str(EXPERIMENTS / 'smoke.yaml')!r}), pairs=pairs);"
        "assert calibration_points(spec) and expand_points(spec) and run_order(spec);"
        "heavy = {'numpy', 'scipy'} & set(sys.modules);"
        "heavy |= {m for m in sys.modules if m == 'demuxlab.ctmc' or m.startswith('demuxlab.ctmc.')};"
        "print(sorted(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# -- the schema ---------------------------------------------------------------------------------------------


def _walk(node: dict[str, Any], path: str, required: set[str], out: list[str]) -> None:
    for key, sub in node.get("properties", {}).items():
        here = f"{path}.{key}"
        if "description" not in sub:
            out.append(f"{here}: no description")
        if key not in required and "default" not in sub:
            out.append(f"{here}: optional without default")
        _walk(sub, here, set(sub.get("required", [])), out)
    items = node.get("items")
    if isinstance(items, dict):
        if "description" not in items:
            out.append(f"{path}[]: no description")
        _walk(items, f"{path}[]", set(items.get("required", [])), out)


def _without_bounds(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_bounds(v) for k, v in node.items() if k not in ("maximum", "maxItems")}
    if isinstance(node, list):
        return [_without_bounds(v) for v in node]
    return node


def test_schema_is_valid_and_documented() -> None:
    doc = schema()
    jsonschema.Draft202012Validator.check_schema(doc)
    # The file plus the upper bounds taken from the binaries' limits (demuxlab.limits) and the names taken
    # from the vocabulary (demuxlab.vocab).
    filled = copy.deepcopy(doc)
    design = filled["properties"]["designs"]["items"]["properties"]
    assert design["pattern"].pop("enum") == list(vocab.PATTERNS)
    assert design["notifiers"]["items"].pop("enum") == list(vocab.NOTIFIERS)
    assert _without_bounds(json.loads(schema_path().read_text())) == _without_bounds(filled)
    bounds = doc["properties"]["matrix"]["properties"]
    assert bounds["work_us"]["items"]["maximum"] == limits().max_work_us
    assert bounds["msg_size"]["items"]["maximum"] == min(limits().max_msg_size, limits().client_max_msg)
    problems: list[str] = []
    _walk(doc, "", set(doc["required"]), problems)
    assert problems == []


# -- errors --------------------------------------------------------------------------------------------------


def test_schema_error_names_file_field_and_value(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL.format(name="x").replace("threads: [1, 2]", "threads: [1, 2, -1]"))
    assert spec_error(path) == f"{path}: matrix.threads[2]: -1 is less than the minimum of 1"


def test_several_problems_report_the_first_and_a_count(tmp_path: Path) -> None:
    text = MINIMAL.format(name="x").replace("threads: [1, 2]", "threads: [0, -1]").replace("[64]", "[0]")
    message = spec_error(write(tmp_path, text))
    assert message.endswith("(and 2 more)")
    assert ": matrix.connections[0]: 0 is less than the minimum of 1 (and 2 more)" in message


def test_invalid_pair_lists_the_valid_notifiers(tmp_path: Path) -> None:
    text = MINIMAL.format(name="x").replace(
        "- {pattern: reactor, notifiers: [epoll-lt]}", "- {pattern: uring, notifiers: [select]}"
    )
    path = write(tmp_path, text)
    assert spec_error(path) == (
        f"{path}: designs[1].notifiers[0]: pattern 'uring' does not work with notifier 'select'; valid: uring"
    )


def test_pattern_the_server_lacks(tmp_path: Path) -> None:
    pairs = [p for p in PAIRS if p.pattern != "reactor"]
    message = spec_error(write(tmp_path, MINIMAL.format(name="x")), pairs=pairs)
    assert "designs[1].pattern: pattern 'reactor' is not offered by demux-server" in message


def test_yaml_syntax_error_gives_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "name: x\nreproduces: none\ndesigns: [\n  {pattern: hsha\nmatrix: {}\n")
    message = spec_error(path)
    assert message.startswith(f"{path}: line ") and "YAML syntax error" in message


def test_duplicate_key_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL.format(name="x") + "repeats: 2\nrepeats: 3\n")
    assert spec_error(path) == f"{path}: line 12: YAML syntax error: duplicate key 'repeats'"


def test_unknown_key_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL.format(name="x") + "repeat: 2\n")
    assert "(top level): Additional properties are not allowed ('repeat' was unexpected)" in spec_error(path)


def test_name_must_equal_file_stem(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL.format(name="other"), name="x")
    assert spec_error(path) == f"{path}: name: 'other' does not match the file name (expected 'x')"


def test_explicit_threads_outside_the_pairs_range(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL.format(name="x").replace("threads: [2, 4]", "threads: [1, 4]"))
    assert spec_error(path) == (
        f"{path}: designs[0].threads[0]: 1 is outside 2..1024 for pattern 'hsha' with notifier 'epoll-lt'"
        " (and 1 more)"
    )


def test_matrix_threads_that_fit_no_value_of_the_pair(tmp_path: Path) -> None:
    text = (
        MINIMAL.format(name="x").replace(", threads: [2, 4]", "").replace("threads: [1, 2]", "threads: [1]")
    )
    message = spec_error(write(tmp_path, text))
    assert (
        "designs[0]: no value of matrix.threads [1] fits pattern 'hsha' with notifier 'epoll-lt'" in message
    )


def test_select_beyond_fd_setsize(tmp_path: Path) -> None:
    text = MINIMAL.format(name="x").replace("[epoll-lt, poll]", "[select]").replace("[64]", "[64, 2000]")
    message = spec_error(write(tmp_path, text))
    assert "matrix.connections[1]: 2000 connections is more than select can watch" in message


def test_same_pair_twice(tmp_path: Path) -> None:
    text = MINIMAL.format(name="x").replace(
        "- {pattern: reactor, notifiers: [epoll-lt]}", "- {pattern: hsha, notifiers: [poll], threads: [3]}"
    )
    message = spec_error(write(tmp_path, text))
    assert "designs[1].notifiers[0]: pattern 'hsha' with notifier 'poll' is already in designs[0]" in message


def test_missing_file(tmp_path: Path) -> None:
    assert "cannot read" in spec_error(tmp_path / "nope.yaml")


def test_empty_file(tmp_path: Path) -> None:
    path = write(tmp_path, "# nothing yet\n")
    assert spec_error(path) == f"{path}: (top level): the file holds no YAML document"


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    path = write(tmp_path, "- 1\n")
    assert spec_error(path) == f"{path}: (top level): [1] is not of type 'object'"


def test_without_pairs_only_the_file_is_checked(tmp_path: Path) -> None:
    text = MINIMAL.format(name="x").replace(
        "- {pattern: reactor, notifiers: [epoll-lt]}", "- {pattern: uring, notifiers: [select]}"
    )
    spec = load_spec(write(tmp_path, text), pairs=None)
    assert [d.resolved_threads for d in spec.designs] == [((2, 4), (2, 4)), ((1, 2),)]


# -- loading, expansion, order, ids -----------------------------------------------------------------------


def test_defaults_are_filled_and_file_is_kept(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL.format(name="x"))
    spec = load_spec(path, pairs=PAIRS)
    assert (spec.launcher, spec.seed, spec.repeats, spec.description) == ("native", 0, 1, "")
    assert (spec.phases.warmup_s, spec.phases.measure_s, spec.phases.cooldown_s) == (1.0, 3.0, 0.0)
    assert (spec.client.threads, spec.client.rate) == (1, None)
    assert spec.text == path.read_text()
    assert spec.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert spec.to_json()["designs"][1]["threads"] is None


def test_expansion_cuts_matrix_threads_to_each_pair(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, MINIMAL.format(name="x")), pairs=PAIRS)
    keys = [p.point_key for p in expand_points(spec)]
    assert keys == [
        "hsha/epoll-lt/t2/w0/c64/b1/ct1/rclosed",
        "hsha/epoll-lt/t4/w0/c64/b1/ct1/rclosed",
        "hsha/poll/t2/w0/c64/b1/ct1/rclosed",
        "hsha/poll/t4/w0/c64/b1/ct1/rclosed",
        "reactor/epoll-lt/t1/w0/c64/b1/ct1/rclosed",  # reactor runs 1 thread only; 2 is dropped
    ]


def test_point_key_formats_numbers_like_the_contract(tmp_path: Path) -> None:
    text = (
        MINIMAL.format(name="x")
        .replace("work_us: [0]", "work_us: [0.5, 10]")
        .replace("reproduces: none", "reproduces: none\nclient: {threads: 3, rate: 20000}")
    )
    spec = load_spec(write(tmp_path, text), pairs=PAIRS)
    keys = {p.point_key for p in expand_points(spec)}
    assert "hsha/poll/t4/w0.5/c64/b1/ct3/r20000" in keys
    assert "reactor/epoll-lt/t1/w10/c64/b1/ct3/r20000" in keys
    point = expand_points(spec)[0]
    assert point.to_json()["point_key"] == point.point_key and point.to_json()["rate"] == 20000.0


def test_design_axes_replace_the_matrix(tmp_path: Path) -> None:
    text = MINIMAL.format(name="x").replace(
        "- {pattern: reactor, notifiers: [epoll-lt]}",
        "- {pattern: reactor, notifiers: [epoll-lt], connections: [7], msg_size: [9], work_us: [3]}",
    )
    spec = load_spec(write(tmp_path, text), pairs=PAIRS)
    reactor = [p for p in expand_points(spec) if p.pattern == "reactor"]
    assert [(p.connections, p.msg_size, p.work_us) for p in reactor] == [(7, 9, 3.0)]


def test_run_order_is_a_seeded_permutation(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, MINIMAL.format(name="x") + "repeats: 3\nseed: 1\n"), pairs=PAIRS)
    order = run_order(spec)
    points = expand_points(spec) + calibration_points(spec)
    expected = {(p, r) for p in points for r in range(3)}
    assert len(order) == len(expected) == 24 and set(order) == expected
    assert run_order(spec) == order
    natural = [(p, r) for p in points for r in range(3)]
    assert order != natural  # 1 in 24! to fail by chance
    other = load_spec(write(tmp_path, MINIMAL.format(name="y") + "repeats: 3\nseed: 2\n", "y"), pairs=PAIRS)
    assert [(p.point_key, r) for p, r in run_order(other)] != [(p.point_key, r) for p, r in order]


def test_run_id_is_the_contracts_uuid5(tmp_path: Path) -> None:
    assert uuid.uuid5(uuid.NAMESPACE_URL, "demuxlab:run") == RUN_NAMESPACE
    path = write(tmp_path, MINIMAL.format(name="x") + "repeats: 2\n")
    spec = load_spec(path, pairs=PAIRS)
    point = expand_points(spec)[0]
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    expected = uuid.uuid5(RUN_NAMESPACE, f"x|{digest}|hsha/epoll-lt/t2/w0/c64/b1/ct1/rclosed|1")
    assert run_id(spec, point, 1) == str(expected)
    ids = {run_id(spec, p, r) for p, r in run_order(spec)}
    assert len(ids) == 10 + 3 * 2  # and three calibration points (hsha over two notifiers, the reactor)
    # Any edit to the file (even a comment) is a new spec version with new run ids.
    path.write_text(path.read_text() + "# edited\n")
    assert run_id(load_spec(path, pairs=PAIRS), point, 1) != str(expected)


def test_find_run_with_and_without_the_workflows_hint(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, MINIMAL.format(name="x") + "repeats: 3\n"), pairs=PAIRS)
    order = run_order(spec)
    assert any(p.instrument for p, _ in order)  # calibration runs are found too
    for point, repeat in order:
        rid = run_id(spec, point, repeat)
        assert find_run(spec, rid) == (point, repeat)
        assert find_run(spec, rid, point.point_key, repeat) == (point, repeat)
    point, repeat = order[0]
    rid = run_id(spec, point, repeat)
    # A hint that does not name the run's own point and repeat finds nothing (never another run).
    assert find_run(spec, rid, point.point_key, repeat + 1) is None
    assert find_run(spec, rid, order[1][0].point_key, order[1][1]) is None
    assert find_run(spec, rid, point.point_key, 99) is None
    assert find_run(spec, "not-a-run") is None


# -- pairs -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{", "not JSON"),
        ("[]", "non-empty JSON array"),
        ('[{"pattern": "lf", "notifier": "poll", "min_threads": 3, "max_threads": 2}]', "below min_threads"),
        ('[{"pattern": "lf", "notifier": "poll", "min_threads": true, "max_threads": 2}]', "min_threads"),
        ('[{"pattern": "lf", "min_threads": 1, "max_threads": 2}]', "[0].notifier"),
        (
            '[{"pattern": "lf", "notifier": "poll", "min_threads": 1, "max_threads": 2},'
            ' {"pattern": "lf", "notifier": "poll", "min_threads": 1, "max_threads": 2}]',
            "listed twice",
        ),
    ],
)
def test_bad_pairs_json(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=None) as info:
        load_pairs_json(text)
    assert fragment in info.value.message


def test_valid_pairs_without_binary(tmp_path: Path) -> None:
    missing = tmp_path / "demux-server"
    with pytest.raises(LaunchError) as info:
        valid_pairs(missing)
    assert info.value.message == f"demux-server not found at {missing}: run `make build`"


def _fake_server(path: Path, pairs_json: str, counter: Path) -> None:
    path.write_text(f"#!/bin/sh\necho x >> '{counter}'\ncat <<'EOF'\n{pairs_json}\nEOF\n")
    path.chmod(0o755)


def test_valid_pairs_runs_list_once_per_binary_version(tmp_path: Path) -> None:
    binary, counter = tmp_path / "demux-server", tmp_path / "calls"
    _fake_server(binary, contract_pairs_json(), counter)
    assert valid_pairs(binary) == PAIRS
    assert valid_pairs(binary) == PAIRS
    assert counter.read_text().count("x") == 1
    _fake_server(binary, json.dumps([PAIRS[0].to_json()]), counter)
    stat = binary.stat()
    os.utime(binary, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert valid_pairs(binary) == [PAIRS[0]]
    assert counter.read_text().count("x") == 2


def test_valid_pairs_reports_a_failing_binary(tmp_path: Path) -> None:
    binary = tmp_path / "demux-server"
    binary.write_text("#!/bin/sh\necho 'demux-server: boom' >&2\nexit 3\n")
    binary.chmod(0o755)
    with pytest.raises(LaunchError) as info:
        valid_pairs(binary)
    assert info.value.message.endswith("--list exited with status 3: demux-server: boom")


def test_calibration_points_are_the_lowest_concurrency_of_each_model_design(tmp_path: Path) -> None:
    lf = "  - {pattern: lf, notifiers: [uring], threads: [4]}\n"
    text = (
        MINIMAL.format(name="x")
        .replace("matrix:\n", lf + "matrix:\n")
        .replace("work_us: [0]", "work_us: [0, 10]")
    )
    spec = load_spec(write(tmp_path, text + "repeats: 3\n"), pairs=PAIRS)
    cal = calibration_points(spec)
    assert sorted(p.point_key for p in cal) == [
        "hsha/epoll-lt/t2/w0/c64/b1/ct1/rclosed/instr",
        "hsha/epoll-lt/t2/w10/c64/b1/ct1/rclosed/instr",
        "hsha/poll/t2/w0/c64/b1/ct1/rclosed/instr",
        "hsha/poll/t2/w10/c64/b1/ct1/rclosed/instr",
        "lf/uring/t1/w0/c64/b1/ct1/rclosed/instr",  # LF's lowest concurrency, not the design's 4 threads
        "lf/uring/t1/w10/c64/b1/ct1/rclosed/instr",
        "reactor/epoll-lt/t1/w0/c64/b1/ct1/rclosed/instr",  # every pattern has a model (issue 19)
        "reactor/epoll-lt/t1/w10/c64/b1/ct1/rclosed/instr",
    ]
    assert all(p.instrument for p in cal) and not any(p.instrument for p in expand_points(spec))
    assert spec.calibration_repeats == 3  # default: the spec's repeats
    assert sum(1 for p, _ in run_order(spec) if p.instrument) == 8 * 3
    # The measured hsha t2 point and its calibration twin are distinct points with distinct run ids.
    measured = next(p for p in expand_points(spec) if p.point_key == "hsha/epoll-lt/t2/w0/c64/b1/ct1/rclosed")
    twin = next(p for p in cal if p.point_key.startswith(measured.point_key))
    assert run_id(spec, measured, 0) != run_id(spec, twin, 0)
    assert twin.to_json()["instrument"] is True


@pytest.mark.parametrize(("repeats", "expected"), [("0", 0), ("1", 1), ("null", 2)])
def test_calibration_repeats(tmp_path: Path, repeats: str, expected: int) -> None:
    spec = load_spec(
        write(tmp_path, MINIMAL.format(name="x") + f"repeats: 2\ncalibration: {{repeats: {repeats}}}\n"),
        pairs=PAIRS,
    )
    assert spec.calibration_repeats == expected
    assert len(calibration_points(spec)) == (0 if expected == 0 else 3)
    assert sum(1 for p, _ in run_order(spec) if p.instrument) == 3 * expected


def test_bad_calibration_section_names_the_field(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL.format(name="x") + "calibration: {repeats: -1}\n")
    with pytest.raises(SpecError, match=r"calibration\.repeats"):
        load_spec(path, pairs=PAIRS)
