"""Experiment specs (CONTRACTS.md §4): loading, checking, expanding into points and ordering the runs.

A spec is checked in three layers, and the first problem found is reported as one line
``file: field.path: problem`` (with ``(and N more)`` when there are several):

1. the file and its YAML: a regular file of at most ``limits.MAX_SPEC_BYTES``, safe YAML (no tags
   beyond the core types) with the line number of a syntax error; duplicate keys are errors, not
   silently "last one wins"; merge keys (``<<: *defaults``) work; nesting depth and the node count with
   every alias expanded are bounded (no "billion laughs", no recursive aliases);
2. the JSON schema ``schemas/experiment.schema.json``, its upper bounds filled in from the binaries' own
   limits (``images/common/demux_limits.h``, :mod:`demuxlab.limits`); integers must be integers (``2.0``
   is not), every number finite and given with at most the binaries' 6 decimals;
3. facts the schema cannot know: the name equals the file stem, each (pattern, notifier) is listed by
   ``demux-server --list``, thread counts lie in the pair's range, select stays under FD_SETSIZE, client
   threads do not outnumber connections, the sweep holds at most ``limits.MAX_RUNS`` runs.

Error messages quote at most a short excerpt of any value.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import importlib.resources
import itertools
import json
import math
import os
import stat
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from demuxlab import limits as lim
from demuxlab.errors import SpecError
from demuxlab.pairs import Pair, pairs_by_key
from demuxlab.point import Point

#: Namespace of run ids: ``uuid5(NAMESPACE_URL, "demuxlab:run")``, fixed forever so ids stay stable.
RUN_NAMESPACE = uuid.UUID("bb733ec1-0469-5864-8c8a-8cc4fcd3fe6c")

#: select() takes descriptors below FD_SETSIZE (1024 in glibc); the server also holds the listening
#: socket, stdio and a few wake-up descriptors, so more connections than this cannot be watched.
SELECT_MAX_CONNECTIONS = 1000


@dataclass(frozen=True)
class Phases:
    warmup_s: float
    measure_s: float
    cooldown_s: float

    def to_json(self) -> dict[str, float]:
        return {"warmup_s": self.warmup_s, "measure_s": self.measure_s, "cooldown_s": self.cooldown_s}


@dataclass(frozen=True)
class ClientSpec:
    threads: int
    rate: float | None  # None: closed loop

    def to_json(self) -> dict[str, Any]:
        return {"threads": self.threads, "rate": self.rate}


@dataclass(frozen=True)
class Matrix:
    threads: tuple[int, ...]
    work_us: tuple[float, ...]
    connections: tuple[int, ...]
    msg_size: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "threads": list(self.threads),
            "work_us": list(self.work_us),
            "connections": list(self.connections),
            "msg_size": list(self.msg_size),
        }


@dataclass(frozen=True)
class Design:
    """One pattern over its notifiers. Axes left ``None`` come from the matrix.

    ``resolved_threads[i]`` is the thread list actually run with ``notifiers[i]``: the design's own
    ``threads``, or else ``matrix.threads`` restricted to the range ``demux-server --list`` gives that pair.
    """

    pattern: str
    notifiers: tuple[str, ...]
    threads: tuple[int, ...] | None
    work_us: tuple[float, ...] | None
    connections: tuple[int, ...] | None
    msg_size: tuple[int, ...] | None
    resolved_threads: tuple[tuple[int, ...], ...]

    def to_json(self) -> dict[str, Any]:
        def opt(values: tuple[Any, ...] | None) -> list[Any] | None:
            return None if values is None else list(values)

        return {
            "pattern": self.pattern,
            "notifiers": list(self.notifiers),
            "threads": opt(self.threads),
            "work_us": opt(self.work_us),
            "connections": opt(self.connections),
            "msg_size": opt(self.msg_size),
        }


@dataclass(frozen=True)
class Spec:
    name: str
    description: str
    reproduces: str
    launcher: str
    seed: int
    repeats: int
    phases: Phases
    client: ClientSpec
    designs: tuple[Design, ...]
    matrix: Matrix
    calibration_repeats: int  # instrumented runs per calibration point (0: none)
    text: str  # the file as read, for the record and the database
    sha256: str  # of the file's bytes; part of every run id
    path: str
    hardware_class: str | None = None  # cluster sweeps: run only on pairs of this class (hw-…)

    def to_json(self) -> dict[str, Any]:
        """The spec with every default filled in, in the file's layout."""
        return {
            "name": self.name,
            "description": self.description,
            "reproduces": self.reproduces,
            "launcher": self.launcher,
            "seed": self.seed,
            "repeats": self.repeats,
            "phases": self.phases.to_json(),
            "client": self.client.to_json(),
            "designs": [design.to_json() for design in self.designs],
            "matrix": self.matrix.to_json(),
            "calibration": {"repeats": self.calibration_repeats},
            **({"hardware_class": self.hardware_class} if self.hardware_class else {}),
        }


# ----------------------------------------------------------------------------------------------------------
# loading


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys instead of keeping the last one, and bounds the
    nesting depth while composing (PyYAML's composer recurses once per level)."""

    _depth = 0
    _nodes = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self._depth += 1
        self._nodes += 1
        try:
            problem = None
            if self._depth > lim.MAX_YAML_DEPTH:
                problem = f"nested more than {lim.MAX_YAML_DEPTH} levels deep"
            elif self._nodes > lim.MAX_YAML_NODES:  # stop reading at once (aliases are counted later)
                problem = f"more than {lim.MAX_YAML_NODES} YAML nodes"
            if problem is not None:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise yaml.composer.ComposerError(None, None, problem, mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *defaults`: merged keys may be overridden, that is what merging is for
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:
                continue  # unhashable: the base class reports it
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


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
    """The experiment spec JSON schema (draft 2020-12), with the binaries' limits as upper bounds."""
    text = importlib.resources.files("demuxlab").joinpath("schemas/experiment.schema.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    for path, keyword, value in _bounds():
        node = loaded
        for part in path:
            node = node[part]
        node[keyword] = value
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
    return Path(str(importlib.resources.files("demuxlab").joinpath("schemas/experiment.schema.json")))


def _fill_defaults(node_schema: dict[str, Any], instance: Any) -> None:
    """Insert the schema's ``default`` for every absent property, at every depth (like Snakemake)."""
    if isinstance(instance, dict):
        for key, sub in node_schema.get("properties", {}).items():
            if key not in instance and "default" in sub:
                instance[key] = copy.deepcopy(sub["default"])
            if key in instance:
                _fill_defaults(sub, instance[key])
    elif isinstance(instance, list) and isinstance(node_schema.get("items"), dict):
        for item in instance:
            _fill_defaults(node_schema["items"], item)


def _field_path(parts: Iterable[str | int]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out or "(top level)"


def _path_sort_key(parts: Iterable[str | int]) -> tuple[tuple[int, int, str], ...]:
    return tuple((0, part, "") if isinstance(part, int) else (1, 0, part) for part in parts)


MAX_PROBLEM_CHARS = 240


def excerpt(text: str, limit: int = MAX_PROBLEM_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters (values in messages may be huge)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _raise_first(file: str, problems: Sequence[str]) -> None:
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise SpecError(f"{file}: {excerpt(problems[0])}{more}")


def _read(path: Path, file: str) -> tuple[bytes, str]:
    """The file's bytes and text: a regular file (no FIFO or device), at most ``MAX_SPEC_BYTES``."""
    cap = lim.MAX_SPEC_BYTES
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then says what it is.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise SpecError(f"{file}: cannot read: {exc.strerror}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise SpecError(f"{file}: cannot read: {kind} (a spec is a YAML file)")
        if info.st_size > cap:
            raise SpecError(f"{file}: {info.st_size} bytes is more than a spec may hold ({cap} bytes)")
        with os.fdopen(os.dup(fd), "rb") as f:
            raw = f.read(cap + 1)
    except OSError as exc:
        raise SpecError(f"{file}: cannot read: {exc.strerror}") from exc
    finally:
        os.close(fd)
    if len(raw) > cap:
        raise SpecError(f"{file}: more than {cap} bytes, more than a spec may hold")
    try:
        return raw, raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"{file}: not UTF-8 text (byte {exc.start})") from exc


def _node_children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_expanded(root: yaml.Node, file: str) -> None:
    """Bound the document as it would be with every alias expanded: nodes, depth, no cycles.

    Iterative post-order over the node graph, each node measured once: linear in the file, whatever
    the aliases would expand to.
    """
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            children = _node_children(node)
            size[key] = min(1 + sum(size[id(c)] for c in children), lim.MAX_YAML_NODES + 1)
            depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
            open_.discard(key)
            line = node.start_mark.line + 1
            if size[key] > lim.MAX_YAML_NODES:
                raise SpecError(
                    f"{file}: line {line}: more than {lim.MAX_YAML_NODES} YAML nodes with aliases expanded"
                )
            if depth[key] > lim.MAX_YAML_DEPTH:
                raise SpecError(
                    f"{file}: line {line}: nested more than {lim.MAX_YAML_DEPTH} levels deep "
                    "with aliases expanded"
                )
            continue
        if key in size:
            continue
        if key in open_:
            raise SpecError(f"{file}: line {node.start_mark.line + 1}: YAML alias refers to itself")
        open_.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _node_children(node) if id(child) not in size)


def _parse_yaml(text: str, file: str) -> Any:
    loader: _StrictLoader | None = None
    try:
        loader = _StrictLoader(text)  # the reader refuses control characters here already
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expanded(node, file)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}" if mark is not None else "(unknown line)"
        problem = exc.problem or exc.context or "invalid YAML"
        raise SpecError(f"{file}: {where}: YAML syntax error: {excerpt(problem)}") from exc
    except yaml.YAMLError as exc:
        raise SpecError(f"{file}: YAML syntax error: {excerpt(str(exc).splitlines()[0])}") from exc
    except RecursionError:  # cannot happen with the bounds above; never a traceback if it does
        raise SpecError(f"{file}: YAML nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()


def _path_text(path: Sequence[str | int]) -> str:
    return _field_path(path)


def _value_problems(doc: Any) -> list[str]:
    """Non-finite numbers, numbers the binaries cannot take in fixed point, keys that are not strings."""
    problems: list[str] = []
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(doc, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            for k, v in value.items():
                if not isinstance(k, str):
                    problems.append(f"{_path_text(path)}: key {excerpt(repr(k), 40)} is not a string")
                    continue
                stack.append((v, (*path, k)))
        elif isinstance(value, list):
            if len(value) > lim.MAX_ARRAY_ITEMS:
                # Before the schema: its uniqueItems is quadratic in the length of a list.
                problems.append(f"{_path_text(path)}: {len(value)} items, more than {lim.MAX_ARRAY_ITEMS}")
                continue
            stack.extend((v, (*path, i)) for i, v in enumerate(value))
        elif isinstance(value, float):
            if not math.isfinite(value):
                problems.append(f"{_path_text(path)}: {value} is not a finite number")
            elif abs(value) < 1e15 and round(value, lim.limits().decimals) != value:
                problems.append(
                    f"{_path_text(path)}: {value!r} has more than {lim.limits().decimals} decimals "
                    "(the binaries take numbers in fixed point)"
                )
    return sorted(problems)


def _schema_problems(doc: Any) -> list[str]:
    validator = StrictValidator(schema())
    errors = sorted(validator.iter_errors(doc), key=lambda e: (_path_sort_key(e.absolute_path), e.message))
    return [f"{_field_path(e.absolute_path)}: {e.message}" for e in errors]


def _describe_range(pair: Pair) -> str:
    return f"{pair.min_threads}..{pair.max_threads}"


def _check_designs(
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


def _check_client(doc: dict[str, Any], problems: list[str]) -> None:
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


def _count_runs(doc: dict[str, Any], resolved: Sequence[tuple[tuple[int, ...], ...]]) -> int:
    """How many runs the spec makes (points × repeats + calibration), counted without expanding them."""
    from demuxlab.ctmc.rates import PATTERNS

    measured = calibration = 0
    for design, per_notifier in zip(doc["designs"], resolved, strict=True):
        workload = 1
        for axis in ("work_us", "connections", "msg_size"):
            workload *= len(design[axis] if design[axis] is not None else doc["matrix"][axis])
        measured += sum(len(threads) for threads in per_notifier) * workload
        if design["pattern"] in PATTERNS:
            calibration += len(design["notifiers"]) * workload
    cal_repeats = doc["calibration"]["repeats"]
    cal_repeats = doc["repeats"] if cal_repeats is None else cal_repeats
    return int(measured * doc["repeats"] + calibration * cal_repeats)


def _unchecked_threads(design: dict[str, Any], matrix: dict[str, Any]) -> tuple[int, ...]:
    return tuple(design["threads"] if design["threads"] is not None else matrix["threads"])


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
    doc = _parse_yaml(text, file)
    if doc is None:
        raise SpecError(f"{file}: (top level): the file holds no YAML document")
    _raise_first(file, _value_problems(doc))
    if isinstance(doc, dict):
        _fill_defaults(schema(), doc)
    _raise_first(file, _schema_problems(doc))
    assert isinstance(doc, dict)  # the schema says so

    problems: list[str] = []
    if doc["name"] != path.stem:
        problems.append(f"name: {doc['name']!r} does not match the file name (expected {path.stem!r})")
    if pairs is not None:
        resolved = _check_designs(doc, pairs, problems)
    else:
        resolved = [
            tuple(_unchecked_threads(d, doc["matrix"]) for _ in d["notifiers"]) for d in doc["designs"]
        ]
    _check_client(doc, problems)
    _raise_first(file, problems)
    runs = _count_runs(doc, resolved)
    if runs > lim.MAX_RUNS:
        raise SpecError(f"{file}: (top level): {runs} runs is more than a spec may hold ({lim.MAX_RUNS})")

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
    spec = Spec(
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
    )
    # Two values that print alike under :g would share a point key (and so a run id): refuse now.
    expand_points(spec)
    calibration_points(spec)
    return spec


def load_checked_spec(path: Path | str, *, check_pairs: bool = True) -> Spec:
    """:func:`load_spec` checked against ``build/bin/demux-server --list`` (``check_pairs``), or against
    the schema only."""
    from demuxlab.pairs import valid_pairs

    return load_spec(path, pairs=valid_pairs() if check_pairs else None)


# ----------------------------------------------------------------------------------------------------------
# expanding


def expand_points(spec: Spec) -> list[Point]:
    """Every point of the sweep, in spec order: design, notifier, threads, work, connections, size."""
    points: list[Point] = []
    seen: dict[str, int] = {}
    for d_index, design in enumerate(spec.designs):
        for notifier, thread_counts in zip(design.notifiers, design.resolved_threads, strict=True):
            for threads in thread_counts:
                for work_us, connections, msg_size in itertools.product(*_workload_axes(spec, design)):
                    point = Point(
                        pattern=design.pattern,
                        notifier=notifier,
                        threads=threads,
                        work_us=work_us,
                        connections=connections,
                        msg_size=msg_size,
                        client_threads=spec.client.threads,
                        rate=spec.client.rate,
                    )
                    if point.point_key in seen:
                        raise SpecError(
                            f"{spec.path}: designs[{d_index}]: point {point.point_key} occurs twice "
                            f"(values that differ only beyond 6 significant digits?)"
                        )
                    seen[point.point_key] = d_index
                    points.append(point)
    return points


def _workload_axes(spec: Spec, design: Design) -> tuple[tuple[float, ...], tuple[int, ...], tuple[int, ...]]:
    """The design's work, connections and size axes (its own, else the matrix's)."""
    return (
        design.work_us if design.work_us is not None else spec.matrix.work_us,
        design.connections if design.connections is not None else spec.matrix.connections,
        design.msg_size if design.msg_size is not None else spec.matrix.msg_size,
    )


def calibration_points(spec: Spec) -> list[Point]:
    """The instrumented points the CTMC rates are fitted from (seed 001 §V-A), in spec order.

    One per HSHA or LF design × notifier × work × connections × size, at the model's lowest concurrency
    (HSHA: monitor + one worker = 2 threads; LF: 1 thread), none when ``calibration.repeats`` is 0.
    """
    if spec.calibration_repeats == 0:
        return []
    from demuxlab.ctmc.rates import PATTERNS, min_threads

    points: dict[str, Point] = {}
    for design in spec.designs:
        if design.pattern not in PATTERNS:
            continue
        for notifier in design.notifiers:
            for work_us, connections, msg_size in itertools.product(*_workload_axes(spec, design)):
                point = Point(
                    pattern=design.pattern,
                    notifier=notifier,
                    threads=min_threads(design.pattern),
                    work_us=work_us,
                    connections=connections,
                    msg_size=msg_size,
                    client_threads=spec.client.threads,
                    rate=spec.client.rate,
                    instrument=True,
                )
                points.setdefault(point.point_key, point)
    return list(points.values())


def run_order(spec: Spec) -> list[tuple[Point, int]]:
    """Every (point, repeat), calibration runs included, in a random order fixed by ``spec.seed``.

    The order sorts by ``sha256("{seed}|{point_key}|{repeat}")``: a seeded random permutation that does
    not depend on Python's RNG, and in which a point keeps its place when other points are added.
    """

    def rank(item: tuple[Point, int]) -> str:
        point, repeat = item
        return hashlib.sha256(f"{spec.seed}|{point.point_key}|{repeat}".encode()).hexdigest()

    runs = [(point, repeat) for point in expand_points(spec) for repeat in range(spec.repeats)]
    runs += [
        (point, repeat) for point in calibration_points(spec) for repeat in range(spec.calibration_repeats)
    ]
    return sorted(runs, key=rank)


def find_run(
    spec: Spec, rid: str, point_key: str | None = None, repeat: int | None = None
) -> tuple[Point, int] | None:
    """The (point, repeat) of run ``rid``, or None when the spec has no such run.

    With ``point_key`` and ``repeat`` (what the workflow already knows of the run) only that run's id is
    computed and compared; without them every run's id is, in spec order (no sorting): a run process then
    costs O(points), not O(runs log runs), which matters at 10,000 runs per spec.
    """
    measured = [(p, spec.repeats) for p in expand_points(spec)]
    measured += [(p, spec.calibration_repeats) for p in calibration_points(spec)]
    if point_key is not None and repeat is not None:
        for point, repeats in measured:
            if point.point_key == point_key and 0 <= repeat < repeats and run_id(spec, point, repeat) == rid:
                return point, repeat
        return None
    for point, repeats in measured:
        key = point.point_key
        for rep in range(repeats):
            if run_id_of(spec.name, spec.sha256, key, rep) == rid:
                return point, rep
    return None


def run_id(spec: Spec, point: Point, repeat: int) -> str:
    """``uuid5(RUN_NAMESPACE, "{experiment}|{spec_sha256}|{point_key}|{repeat}")`` as a string."""
    return run_id_of(spec.name, spec.sha256, point.point_key, repeat)


def run_id_of(experiment: str, spec_sha256: str, point_key: str, repeat: int) -> str:
    """The run id rule (CONTRACTS.md §4) over its parts; ingest checks every record against it."""
    return str(uuid.uuid5(RUN_NAMESPACE, f"{experiment}|{spec_sha256}|{point_key}|{repeat}"))
