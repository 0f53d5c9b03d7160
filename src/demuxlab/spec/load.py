"""Loading a spec file: read it bounded, parse, check, build the :class:`~demuxlab.spec.model.Spec`."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from demuxlab import limits as lim
from demuxlab.designs import Pair
from demuxlab.errors import SpecError
from demuxlab.jsonio import FileRefused, read_capped
from demuxlab.phases import Phases
from demuxlab.spec.adaptive import check_adaptive, check_budget, first_round_runs, parse_adaptive
from demuxlab.spec.check import (
    check_client,
    check_designs,
    count_runs,
    schema_problems,
    unchecked_threads,
    value_problems,
)
from demuxlab.spec.expand import calibration_points, expand_points
from demuxlab.spec.model import ClientSpec, Design, Matrix, Spec
from demuxlab.spec.problems import raise_first
from demuxlab.spec.schema import fill_defaults, schema
from demuxlab.spec.yamltext import parse_yaml


def _read(path: Path, file: str) -> tuple[bytes, str]:
    """The file's bytes and text: a regular file (no FIFO or device), at most ``MAX_SPEC_BYTES``."""
    cap = lim.MAX_SPEC_BYTES
    try:
        raw = read_capped(path, cap)
    except FileRefused as exc:
        if exc.size is not None:
            raise SpecError(f"{file}: {exc.size} bytes is more than a spec may hold ({cap} bytes)") from None
        if exc.too_big:
            raise SpecError(f"{file}: more than {cap} bytes, more than a spec may hold") from None
        hint = "" if exc.regular else " (a spec is a YAML file)"
        raise SpecError(f"{file}: cannot read: {exc.reason}{hint}") from None
    try:
        return raw, raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"{file}: not UTF-8 text (byte {exc.start})") from exc


def _floats(values: Sequence[float] | None) -> tuple[float, ...] | None:
    return None if values is None else tuple(float(v) for v in values)


def _ints(values: Sequence[int] | None) -> tuple[int, ...] | None:
    return None if values is None else tuple(int(v) for v in values)


def load_spec(path: Path | str, pairs: list[Pair] | None = None) -> Spec:
    """Load and check the spec at ``path`` against ``pairs`` (what ``demux-server --list`` reports).

    With ``pairs=None`` only the file itself is checked (YAML, schema, name): pattern × notifier validity
    and thread ranges are skipped, and a design without its own ``threads`` takes ``matrix.threads`` as
    is, so the points are exact only when ``pairs`` is given. Raises :class:`SpecError` (one line: the
    first problem, plus ``(and N more)``).
    """
    path = Path(path)
    file = str(path)
    raw, text = _read(path, file)
    doc, resolved = _checked(path, file, text, pairs)
    spec = _spec_of(doc, resolved, file, raw, text)
    # Two values that print alike under :g would share a point key (and so a run id): refuse now.
    points = expand_points(spec)
    calibration = calibration_points(spec)
    if spec.adaptive is not None:
        first = first_round_runs(points, calibration, spec.adaptive, spec.repeats, spec.calibration_repeats)
        budget: list[str] = []
        check_budget(spec.adaptive, first, spec.run_s, budget)
        raise_first(file, budget)
    return spec


def _checked(
    path: Path, file: str, text: str, pairs: list[Pair] | None
) -> tuple[dict[str, Any], list[tuple[tuple[int, ...], ...]]]:
    """The spec's document (YAML, values, schema with its defaults, the checks beyond it) and each design's
    thread counts per notifier (those of its pair's range, with ``pairs``)."""
    doc = parse_yaml(text, file)
    if doc is None:
        raise SpecError(f"{file}: (top level): the file holds no YAML document")
    raise_first(file, value_problems(doc))
    if isinstance(doc, dict):
        fill_defaults(schema(), doc)
    raise_first(file, schema_problems(doc))
    assert isinstance(doc, dict)  # the schema says so

    problems: list[str] = []
    if doc["name"] != path.stem:
        problems.append(f"name: {doc['name']!r} does not match the file name (expected {path.stem!r})")
    if pairs is not None:
        resolved = check_designs(doc, pairs, problems)
    else:
        resolved = [
            tuple(unchecked_threads(d, doc["matrix"]) for _ in d["notifiers"]) for d in doc["designs"]
        ]
    check_client(doc, problems)
    check_adaptive(doc, problems)
    raise_first(file, problems)
    runs = count_runs(doc, resolved)
    if runs > lim.MAX_RUNS:
        raise SpecError(f"{file}: (top level): {runs} runs is more than a spec may hold ({lim.MAX_RUNS})")
    return doc, resolved


def _spec_of(
    doc: dict[str, Any], resolved: Sequence[tuple[tuple[int, ...], ...]], file: str, raw: bytes, text: str
) -> Spec:
    """The checked document as frozen values."""
    matrix = doc["matrix"]
    designs = tuple(
        Design(
            pattern=d["pattern"],
            notifiers=tuple(d["notifiers"]),
            threads=_ints(d["threads"]),
            work_us=_floats(d["work_us"]),
            connections=_ints(d["connections"]),
            msg_size=_ints(d["msg_size"]),
            resolved_threads=resolved[i],
        )
        for i, d in enumerate(doc["designs"])
    )
    return Spec(
        name=doc["name"],
        description=doc["description"],
        reproduces=doc["reproduces"],
        launcher=doc["launcher"],
        seed=doc["seed"],
        repeats=doc["repeats"],
        phases=Phases(
            warmup_s=float(doc["phases"]["warmup_s"]),
            measure_s=float(doc["phases"]["measure_s"]),
            cooldown_s=float(doc["phases"]["cooldown_s"]),
        ),
        client=ClientSpec(
            threads=doc["client"]["threads"],
            rate=None if doc["client"]["rate"] is None else float(doc["client"]["rate"]),
        ),
        designs=designs,
        matrix=Matrix(
            threads=tuple(int(v) for v in matrix["threads"]),
            work_us=tuple(float(v) for v in matrix["work_us"]),
            connections=tuple(int(v) for v in matrix["connections"]),
            msg_size=tuple(int(v) for v in matrix["msg_size"]),
        ),
        calibration_repeats=(
            doc["repeats"] if doc["calibration"]["repeats"] is None else doc["calibration"]["repeats"]
        ),
        text=text,
        sha256=hashlib.sha256(raw).hexdigest(),
        path=file,
        hardware_class=doc.get("hardware_class"),
        adaptive=parse_adaptive(doc.get("adaptive"), doc["repeats"]),
    )


def load_checked_spec(path: Path | str, *, check_pairs: bool = True) -> Spec:
    """:func:`load_spec` checked against ``build/bin/demux-server --list`` (``check_pairs``), or against
    the schema only."""
    from demuxlab.designs import valid_pairs

    return load_spec(path, pairs=valid_pairs() if check_pairs else None)
