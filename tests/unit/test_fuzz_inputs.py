"""Property-based fuzzing of specs and run records: a clear one-line error or a valid result, never a
traceback, never a wrong acceptance, never longer than a second (of CPU: the machine is shared).

The variants and the oracles live in ``bench/fuzz/cases.py``, shared with the larger campaign
``bench/fuzz/fuzz_inputs.py``; Hypothesis drives the random choices here, with bounded example counts.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.fuzz import cases as fl

PAIRS = fl.contract_pairs()
FUZZ = settings(
    max_examples=120,
    deadline=None,  # timed below in CPU seconds: wall time on a shared machine says little
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _cpu() -> float:
    return time.process_time()


@FUZZ
@given(rng=st.randoms(use_true_random=False))
def test_spec_variants_are_clear_errors_or_valid_plans(tmp_path: Path, rng) -> None:  # type: ignore[no-untyped-def]
    what, data = fl.spec_variant(rng)
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    path = folder / f"{what.split(':', 1)[0]}.yaml"
    path.write_bytes(data)
    t0 = _cpu()
    cls, detail = fl.classify_spec(path, PAIRS)
    spent = _cpu() - t0
    assert cls in ("clear", "accepted"), f"{what}: {cls}: {detail}"
    assert spent < 1.0, f"{what}: {spent:.2f} s of CPU"


@FUZZ
@given(rng=st.randoms(use_true_random=False))
def test_record_variants_are_clear_errors_or_right(tmp_path: Path, rng) -> None:  # type: ignore[no-untyped-def]
    what, data = fl.record_variant(rng)
    path = Path(tempfile.mkdtemp(dir=tmp_path)) / "record.json"
    path.write_bytes(data)
    t0 = _cpu()
    cls, detail = fl.classify_record(path)
    spent = _cpu() - t0
    assert cls in ("clear", "accepted"), f"{what}: {cls}: {detail}"
    assert spent < 1.0, f"{what}: {spent:.2f} s of CPU"


@pytest.mark.parametrize("side", ["server_cpus", "client_cpus"])
@pytest.mark.parametrize("bad", [2.0, "0-3", {"0": 1}, [0.5], [-1]])
def test_pinning_cpus_not_a_list_of_cpus_is_refused(tmp_path: Path, side: str, bad: object) -> None:
    """A record whose pinning names its CPUs as anything but a list of CPU numbers is one clear error naming
    the field (Hypothesis found ``pinning.client_cpus = 2.0``: the validity checks' placement raised
    TypeError)."""
    from demuxlab.spec import run_id_of

    doc = fl.base_record()
    doc["pinning"][side] = bad
    exp = doc["experiment"]
    doc["run_id"] = run_id_of(exp["name"], exp["spec_sha256"], doc["point"]["point_key"], doc["repeat"])
    path = tmp_path / "record.json"
    path.write_text(json.dumps(doc))
    cls, detail = fl.classify_record(path)
    assert cls == "clear", detail
    assert f"pinning.{side}" in detail, detail


HOSTILE_BASE = "name: hostile\nreproduces: none\ndesigns: [{pattern: reactor, notifiers: [poll]}]\n"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("repeats: 2.0", "repeats: 2.0 is not of type 'integer'"),
        ("repeats: !!float 2", "repeats: 2.0 is not of type 'integer'"),
        ("repeats: 1000000000", "repeats: 1000000000 is greater than the maximum of 100000"),
        ("client: {threads: 1.0}", "client.threads: 1.0 is not of type 'integer'"),
        ("client: {threads: 65}", "client.threads: 65 threads is more than the 64 connections"),
        ("phases: {measure_s: .nan}", "phases.measure_s: nan is not a finite number"),
        ("phases: {measure_s: 86401}", "phases.measure_s: 86401 is greater than the maximum of 86400"),
        ("client: {rate: 1.0e+10}", "client.rate: 10000000000.0 is greater than the maximum of 1000000000"),
        ("matrix: {work_us: [.inf]}", "matrix.work_us[0]: inf is not a finite number"),
        ("matrix: {msg_size: [1099511627776]}", "matrix.msg_size[0]: 1099511627776 is greater than"),
        ("matrix: {connections: [10000000]}", "matrix.connections[0]: 10000000 is greater than"),
        ("matrix: {work_us: [0.0000001]}", "has more than 6 decimals"),
        ("x: " + "[" * 3000 + "]" * 3000, "nested more than 32 levels deep"),
        ("a: &a [*a]", "YAML alias refers to itself"),
    ],
)
def test_issue_examples_are_refused(tmp_path: Path, text: str, problem: str) -> None:
    from demuxlab.errors import SpecError
    from demuxlab.spec import load_spec

    path = tmp_path / "hostile.yaml"
    path.write_text(HOSTILE_BASE + ("" if "matrix" in text else "matrix: {}\n") + text + "\n")
    with pytest.raises(SpecError) as info:
        load_spec(path, pairs=PAIRS)
    assert problem in info.value.message and "\n" not in info.value.message, info.value.message


def test_merge_keys_work_and_bombs_stay_small(tmp_path: Path) -> None:
    from demuxlab.errors import SpecError
    from demuxlab.spec import load_spec

    path = tmp_path / "merge.yaml"
    path.write_text(
        "name: merge\nreproduces: none\n"
        "defaults: &d {pattern: reactor, notifiers: [poll]}\n"
        "designs:\n  - <<: *d\n  - {<<: *d, pattern: lf, threads: [2]}\n"
        "matrix: {connections: [8]}\n".replace("defaults: &d", "x-defaults: &d")
    )
    # An unknown top-level key is refused even when it only carries an anchor: the schema is closed.
    with pytest.raises(SpecError, match="x-defaults"):
        load_spec(path, pairs=PAIRS)
    path.write_text(
        "name: merge\nreproduces: none\n"
        "designs:\n  - &d {pattern: reactor, notifiers: [poll]}\n  - {<<: *d, pattern: lf, threads: [2]}\n"
        "matrix: {connections: [8]}\n"
    )
    spec = load_spec(path, pairs=PAIRS)
    assert [(d.pattern, d.notifiers) for d in spec.designs] == [("reactor", ("poll",)), ("lf", ("poll",))]

    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(
        "name: bomb\nreproduces: none\n" + fl._laughs(9, 9).replace("description: ", "description: ")
    )
    t0 = _cpu()
    with pytest.raises(SpecError) as info:
        load_spec(bomb, pairs=PAIRS)
    assert "YAML nodes with aliases expanded" in info.value.message and len(info.value.message) < 300
    assert _cpu() - t0 < 1.0


def test_special_files_are_refused_at_once(tmp_path: Path) -> None:
    import os

    from demuxlab.errors import SpecError
    from demuxlab.spec import load_spec

    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (50 * 1024 * 1024))
    for path, problem in (
        (fifo, "not a regular file"),
        (Path("/dev/zero"), "not a regular file"),
        (big, "more than a spec may hold"),
    ):
        with pytest.raises(SpecError, match=problem):
            load_spec(path, pairs=PAIRS)


# -- issue 23: YAML versions, strings that are not text, ok records without evidence, stored runs -----------


@pytest.mark.parametrize("version", fl.YAML_VERSIONS)
def test_only_yaml_1_1_may_be_declared(tmp_path: Path, version: str) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(f"%YAML {version}\n---\n" + fl.SPEC_BASES[1].read_text())
    cls, detail = fl.classify_spec(path, PAIRS)
    if version == "1.1":
        assert cls == "accepted", detail
    else:
        assert cls == "clear" and f"line 1: %YAML {version}: the spec reader implements YAML 1.1" in detail


@pytest.mark.parametrize("bad", fl.NOT_TEXT)
@pytest.mark.parametrize("field", fl.SPEC_STRING_FIELDS)
def test_spec_strings_that_are_not_text_are_refused(tmp_path: Path, field: str, bad: str) -> None:
    import yaml

    doc = yaml.safe_load(fl.SPEC_BASES[1].read_text())
    doc[field] = "a spec about " + bad
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    assert "\\" in path.read_text()  # written as a YAML escape, the file itself is UTF-8
    t0 = _cpu()
    cls, detail = fl.classify_spec(path, PAIRS)
    assert _cpu() - t0 < 1.0
    assert cls == "clear" and f"{field}: not Unicode text: " in detail, detail
    assert detail.isprintable()  # the character is shown escaped


@pytest.mark.parametrize("seed", range(40))
def test_ok_records_without_their_evidence_and_strings_not_text_are_refused(
    tmp_path: Path, seed: int
) -> None:
    import json
    import random

    rng = random.Random(seed)
    variant = fl._evidence_variant if seed % 2 == 0 else fl._text_variant
    what, doc = variant(fl.base_record(), rng)
    path = tmp_path / "record.json"
    path.write_text(json.dumps(doc))
    cls, detail = fl.classify_record(path)
    expected = "accepted" if what.endswith(": consistent") else "clear"
    assert cls == expected, f"{what}: {cls}: {detail}"
    assert detail.isprintable()


@pytest.mark.postgres
def test_records_of_a_stored_run_never_change_it_silently(tmp_path: Path, database_url: str) -> None:
    """Every kind of rerun variant, ingested without --replace into a database holding the base run: the
    same record is accepted (a no-op), every other one refused with the database as it was."""
    import random

    from sqlalchemy import create_engine

    from demuxlab.ingest import ingest_run_record

    engine = create_engine(database_url)
    ingest_run_record(engine, fl.base_record(), source="base.json")
    engine.dispose()
    rng = random.Random(23)
    seen: dict[str, str] = {}
    while len(seen) < 12:
        what, data = fl.rerun_variant(rng)
        path = tmp_path / f"again{len(seen)}.json"
        path.write_bytes(data)
        cls, detail = fl.classify_reingest(path, database_url)
        same = what in ("same", "keys reordered", "collected later")
        assert cls == ("accepted" if same else "clear"), f"{what}: {cls}: {detail}"
        seen[what] = cls
