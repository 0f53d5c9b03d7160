"""What a spec's document must satisfy beyond YAML: finite numbers in the binaries' fixed point, the schema,
each pattern × notifier listed by ``demux-server --list`` with threads in its range, select under
FD_SETSIZE, a connection per client thread. Pure: documents in, problems (``field: problem``) out."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from demuxlab import limits as lim
from demuxlab.designs import Pair, pairs_by_key
from demuxlab.spec.problems import excerpt, field_path, path_sort_key, text_problem
from demuxlab.spec.schema import StrictValidator, schema

#: select() takes descriptors below FD_SETSIZE (1024 in glibc); the server also holds the listening
#: socket, stdio and a few wake-up descriptors, so more connections than this cannot be watched.
SELECT_MAX_CONNECTIONS = 1000


def value_problems(doc: Any) -> list[str]:
    """Non-finite numbers, numbers the binaries cannot take in fixed point, keys that are not strings,
    strings (keys included) that are not Unicode text (:func:`~demuxlab.spec.problems.text_problem`)."""
    problems: list[str] = []
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(doc, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            for k, v in value.items():
                if not isinstance(k, str):
                    problems.append(f"{field_path(path)}: key {excerpt(repr(k), 40)} is not a string")
                    continue
                bad_key = text_problem(k)
                if bad_key is not None:  # the key cannot be part of a printed field path
                    problems.append(f"{field_path(path)}: a key is {bad_key}")
                    continue
                stack.append((v, (*path, k)))
        elif isinstance(value, list):
            if len(value) > lim.MAX_ARRAY_ITEMS:
                # Before the schema: its uniqueItems is quadratic in the length of a list.
                problems.append(f"{field_path(path)}: {len(value)} items, more than {lim.MAX_ARRAY_ITEMS}")
                continue
            stack.extend((v, (*path, i)) for i, v in enumerate(value))
        elif isinstance(value, str):
            bad = text_problem(value)
            if bad is not None:
                problems.append(f"{field_path(path)}: {bad}")
        elif isinstance(value, float):
            if not math.isfinite(value):
                problems.append(f"{field_path(path)}: {value} is not a finite number")
            elif abs(value) < 1e15 and round(value, lim.limits().decimals) != value:
                problems.append(
                    f"{field_path(path)}: {value!r} has more than {lim.limits().decimals} decimals "
                    "(the binaries take numbers in fixed point)"
                )
    return sorted(problems)


def schema_problems(doc: Any) -> list[str]:
    validator = StrictValidator(schema())
    errors = sorted(validator.iter_errors(doc), key=lambda e: (path_sort_key(e.absolute_path), e.message))
    return [f"{field_path(e.absolute_path)}: {e.message}" for e in errors]


def _describe_range(pair: Pair) -> str:
    return f"{pair.min_threads}..{pair.max_threads}"


def check_designs(
    doc: dict[str, Any], pairs: list[Pair], problems: list[str]
) -> list[tuple[tuple[int, ...], ...]]:
    """Check each design against the server's pairs; return the threads to run per (design, notifier)."""
    known = pairs_by_key(pairs)
    notifiers_of: dict[str, list[str]] = {}
    for offered in pairs:
        notifiers_of.setdefault(offered.pattern, []).append(offered.notifier)
    first_seen: dict[tuple[str, str], int] = {}
    matrix = doc["matrix"]
    resolved: list[tuple[tuple[int, ...], ...]] = []
    for d_index, design in enumerate(doc["designs"]):
        pattern = design["pattern"]
        where = f"designs[{d_index}]"
        per_notifier: list[tuple[int, ...]] = []
        if pattern not in notifiers_of:
            patterns = ", ".join(sorted(notifiers_of))
            problems.append(
                f"{where}.pattern: pattern {pattern!r} is not offered by demux-server; valid: {patterns}"
            )
            resolved.append(tuple(() for _ in design["notifiers"]))
            continue
        for n_index, notifier in enumerate(design["notifiers"]):
            n_where = f"{where}.notifiers[{n_index}]"
            pair = known.get((pattern, notifier))
            if pair is None:
                valid = ", ".join(sorted(notifiers_of[pattern]))
                problems.append(
                    f"{n_where}: pattern {pattern!r} does not work with notifier {notifier!r}; valid: {valid}"
                )
                per_notifier.append(())
                continue
            if pair.key in first_seen:
                problems.append(
                    f"{n_where}: pattern {pattern!r} with notifier {notifier!r} is already in "
                    f"designs[{first_seen[pair.key]}]"
                )
            first_seen.setdefault(pair.key, d_index)
            per_notifier.append(_resolve_threads(design, matrix, pair, where, problems))
            _check_select(design, matrix, notifier, where, problems)
        resolved.append(tuple(per_notifier))
    return resolved


def _resolve_threads(
    design: dict[str, Any], matrix: dict[str, Any], pair: Pair, where: str, problems: list[str]
) -> tuple[int, ...]:
    label = f"pattern {pair.pattern!r} with notifier {pair.notifier!r}"
    if design["threads"] is not None:
        for t_index, threads in enumerate(design["threads"]):
            if not pair.min_threads <= threads <= pair.max_threads:
                problems.append(
                    f"{where}.threads[{t_index}]: {threads} is outside {_describe_range(pair)} for {label}"
                )
        return tuple(design["threads"])
    fitting = tuple(t for t in matrix["threads"] if pair.min_threads <= t <= pair.max_threads)
    if not fitting:
        problems.append(
            f"{where}: no value of matrix.threads {matrix['threads']} fits {label} "
            f"({_describe_range(pair)}); give {where}.threads"
        )
    return fitting


def _check_select(
    design: dict[str, Any], matrix: dict[str, Any], notifier: str, where: str, problems: list[str]
) -> None:
    if notifier != "select":
        return
    own = design["connections"] is not None
    values = design["connections"] if own else matrix["connections"]
    field = f"{where}.connections" if own else "matrix.connections"
    for c_index, connections in enumerate(values):
        if connections > SELECT_MAX_CONNECTIONS:
            problems.append(
                f"{field}[{c_index}]: {connections} connections is more than select can watch "
                f"(at most {SELECT_MAX_CONNECTIONS}, FD_SETSIZE 1024) in {where}"
            )


def check_client(doc: dict[str, Any], problems: list[str]) -> None:
    """Every client thread needs a connection (demux-client refuses --threads > --connections)."""
    threads = doc["client"]["threads"]
    for d_index, design in enumerate(doc["designs"]):
        own = design["connections"] is not None
        values = design["connections"] if own else doc["matrix"]["connections"]
        field = f"designs[{d_index}].connections" if own else "matrix.connections"
        for c_index, connections in enumerate(values):
            if connections < threads:
                problems.append(
                    f"client.threads: {threads} threads is more than the {connections} connections of "
                    f"{field}[{c_index}] (every client thread needs a connection)"
                )
                return


def count_runs(doc: dict[str, Any], resolved: Sequence[tuple[tuple[int, ...], ...]]) -> int:
    """How many runs the spec makes (points × repeats + calibration), counted without expanding them."""
    measured = calibration = 0
    for design, per_notifier in zip(doc["designs"], resolved, strict=True):
        workload = 1
        for axis in ("work_us", "connections", "msg_size"):
            workload *= len(design[axis] if design[axis] is not None else doc["matrix"][axis])
        measured += sum(len(threads) for threads in per_notifier) * workload
        calibration += len(design["notifiers"]) * workload  # every pattern has a model (calibration_points)
    cal_repeats = doc["calibration"]["repeats"]
    cal_repeats = doc["repeats"] if cal_repeats is None else cal_repeats
    repeats = doc["repeats"]
    adaptive = doc.get("adaptive") or {}
    if adaptive.get("repeats") is not None and adaptive["repeats"].get("max") is not None:
        repeats = max(repeats, adaptive["repeats"]["max"])  # an adaptive sweep's most runs per point
    return int(measured * repeats + calibration * cal_repeats)


def unchecked_threads(design: dict[str, Any], matrix: dict[str, Any]) -> tuple[int, ...]:
    return tuple(design["threads"] if design["threads"] is not None else matrix["threads"])
