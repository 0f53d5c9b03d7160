"""The spec's JSON schema (``experiment.schema.json`` beside this module), with the binaries' limits as
upper bounds and the vocabulary's names filled in, and the strict validator specs and run records are
checked with: an integer is not ``2.0``, a number is finite, ``uniqueItems`` in linear time."""

from __future__ import annotations

import copy
import functools
import importlib.resources
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema

from demuxlab import limits as lim
from demuxlab.spec.problems import excerpt
from demuxlab.vocab import NOTIFIERS, PATTERNS


# Upper bounds the schema file leaves to the binaries (and to demuxlab.limits): (path, keyword, value).
def _bounds() -> list[tuple[tuple[str, ...], str, int]]:
    b = lim.limits()
    axes = ("properties", "matrix", "properties")
    design = ("properties", "designs", "items", "properties")
    out: list[tuple[tuple[str, ...], str, int]] = [
        (("properties", "seed"), "maximum", lim.MAX_SEED),
        (("properties", "repeats"), "maximum", lim.MAX_RUNS),
        (("properties", "calibration", "properties", "repeats"), "maximum", lim.MAX_RUNS),
        (("properties", "client", "properties", "threads"), "maximum", b.client_max_threads),
        (("properties", "client", "properties", "rate"), "maximum", b.max_rate),
        (("properties", "designs"), "maxItems", lim.MAX_ARRAY_ITEMS),
    ]
    for phase in ("warmup_s", "measure_s", "cooldown_s"):
        out.append((("properties", "phases", "properties", phase), "maximum", b.max_phase_s))
    maxima = {
        "threads": b.max_threads,
        "work_us": b.max_work_us,
        "connections": b.connections,
        "msg_size": b.msg_size,
    }
    for prefix in (axes, design):
        for axis, value in maxima.items():
            out.append(((*prefix, axis, "items"), "maximum", value))
            out.append(((*prefix, axis), "maxItems", lim.MAX_ARRAY_ITEMS))
    return out


@functools.cache
def schema() -> dict[str, Any]:
    """The experiment spec JSON schema (draft 2020-12), with the binaries' limits as upper bounds and the
    patterns and notifiers of :mod:`demuxlab.vocab` as the designs' enums."""
    text = schema_path().read_text()
    loaded: dict[str, Any] = json.loads(text)
    for path, keyword, value in _bounds():
        node = loaded
        for part in path:
            node = node[part]
        node[keyword] = value
    # The names are the vocabulary's, filled in here like the bounds: the file lists none, so a new pattern
    # or notifier is added in demuxlab.vocab alone (tests/unit/test_vocab.py checks the file keeps no copy).
    design = loaded["properties"]["designs"]["items"]["properties"]
    design["pattern"]["enum"] = list(PATTERNS)
    design["notifiers"]["items"]["enum"] = list(NOTIFIERS)
    return loaded


def _is_int(checker: Any, value: Any) -> bool:
    # JSON Schema's "integer" admits 2.0; a count given as 2.0 (or !!float 2) is a mistake here.
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(checker: Any, value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return not isinstance(value, float) or math.isfinite(value)


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """uniqueItems in linear time. jsonschema's compares every pair when items cannot be sorted (a list
    of mappings): seconds for a few thousand. Our unique lists hold scalars; a list with anything else
    already fails its items' type, so it is not compared at all."""
    if not unique or not isinstance(instance, list):
        return
    seen: set[tuple[str, Any]] = set()
    for item in instance:
        key: tuple[str, Any]
        if item is None or isinstance(item, bool | str):
            key = (type(item).__name__, item)
        elif isinstance(item, int | float):
            key = ("number", item)  # 1 and 1.0 are the same JSON number
        else:
            return
        if key in seen:
            yield jsonschema.ValidationError(f"{excerpt(repr(item), 40)} occurs more than once")
            return
        seen.add(key)


StrictValidator = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
    jsonschema.Draft202012Validator,
    validators={"uniqueItems": _unique_items},
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine_many(
        {"integer": _is_int, "number": _is_number}
    ),
)


def schema_path() -> Path:
    """The schema file on disk (for Snakemake's ``validate``)."""
    return Path(str(importlib.resources.files("demuxlab.spec").joinpath("experiment.schema.json")))


def fill_defaults(node_schema: dict[str, Any], instance: Any) -> None:
    """Insert the schema's ``default`` for every absent property, at every depth (like Snakemake)."""
    if isinstance(instance, dict):
        for key, sub in node_schema.get("properties", {}).items():
            if key not in instance and "default" in sub:
                instance[key] = copy.deepcopy(sub["default"])
            if key in instance:
                fill_defaults(sub, instance[key])
    elif isinstance(instance, list) and isinstance(node_schema.get("items"), dict):
        for item in instance:
            fill_defaults(node_schema["items"], item)
