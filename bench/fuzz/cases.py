"""Hostile experiment specs and run records, and the oracles that judge what demuxlab made of them.

Shared by the fuzzing campaign (``bench/fuzz/fuzz_inputs.py``) and the property tests
(``tests/unit/test_fuzz_inputs.py``). A variant comes from a seeded ``random.Random``; its outcome is one
of four classes:

- ``clear``: refused with one line (``DemuxlabError``) that names the file, at most 500 characters;
- ``accepted``: taken, and the oracle finds nothing wrong with what was taken;
- ``wrongly_accepted``: taken, but the oracle finds a value the binaries or the database would refuse
  (or one that breaks a rule: a run id that is not its rule, a number that is not finite…);
- ``traceback``: any other exception, or an error message of several lines or unbounded length;
- ``hang``: (campaign only) more than the time limit, or killed for memory.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import json
import math
import random
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from bench import REPO

SPEC_BASES = [REPO / "experiments" / "smoke.yaml", REPO / "tests" / "integration" / "specs" / "tiny.yaml"]
RECORD_BASE = REPO / "tests" / "db" / "data" / "run_record.json"
MAX_MESSAGE = 500

# -- values ------------------------------------------------------------------------------------------------


def _deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


HOSTILE: list[Callable[[], Any]] = [
    lambda: 2.0,
    lambda: 1.0,
    lambda: -1,
    lambda: 0,
    lambda: 0.0,
    lambda: 10**3,
    lambda: 10**6,
    lambda: 10**7,
    lambda: 10**9,
    lambda: 10**12,
    lambda: 2**31,
    lambda: 2**63,
    lambda: 10**40,
    lambda: float("nan"),
    lambda: float("inf"),
    lambda: -float("inf"),
    lambda: 1e-7,
    lambda: 0.1234567,
    lambda: 1e300,
    lambda: 86401,
    lambda: 1e9,
    lambda: 1e10,
    lambda: 1048577,
    lambda: 1000001,
    lambda: 1025,
    lambda: "1",
    lambda: "",
    lambda: "x" * 5000,
    lambda: True,
    lambda: None,
    lambda: [],
    lambda: {},
    lambda: [1] * 1500,
    lambda: [{"a": i} for i in range(1000)],  # unsortable items: quadratic uniqueItems in jsonschema
    lambda: [{}] * 3000,
    lambda: list(range(6000)),
    lambda: list(range(1, 60)),
    lambda: _deep(40),
    lambda: {"a": 1},
    lambda: {1: 2},
    lambda: "2026-11-21T10:00:00Z",
    lambda: "1999-01-01T00:00:00Z",
    lambda: str(uuid.uuid4()),
    # Not Unicode text (issue 23): lone surrogates from a \\u escape, and U+0000.
    lambda: "\ud800",
    lambda: "run \udfff here",
    lambda: "a\x00b",
]

#: Strings that are not Unicode text that can be stored: lone surrogates (high, low, reversed pair) and NUL.
NOT_TEXT = ["\ud800", "x\udfff", "\udc00\ud800", "tail \ud83d", "nul\x00", "\x00"]


def hostile(rng: random.Random) -> Any:
    return rng.choice(HOSTILE)()


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.append((*prefix, k))
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:20]):
            out.append((*prefix, i))
            out += _paths(v, (*prefix, i))
    return out


def _container(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path[:-1]:
        doc = doc[part]
    return doc


def mutate_doc(doc: Any, rng: random.Random) -> tuple[Any, str]:
    """One structural change: replace, delete, add or retype a node."""
    doc = copy.deepcopy(doc)
    paths = _paths(doc)
    if not paths:
        return hostile(rng), "whole document replaced"
    path = rng.choice(paths)
    parent = _container(doc, path)
    kind = rng.random()
    if kind < 0.6:
        value = hostile(rng)
        parent[path[-1]] = value
        return doc, f"{'.'.join(map(str, path))} = {repr(value)[:40]}"
    if kind < 0.75 and isinstance(parent, dict):
        del parent[path[-1]]
        return doc, f"{'.'.join(map(str, path))} deleted"
    if kind < 0.85 and isinstance(parent, dict):
        parent["unknown_" + str(rng.randrange(100))] = hostile(rng)
        return doc, f"unknown key beside {'.'.join(map(str, path))}"
    value = parent[path[-1]]
    if isinstance(value, int | float) and not isinstance(value, bool):
        parent[path[-1]] = float(value) if isinstance(value, int) else value * rng.choice([-1, 1e6, 1e-9])
        return doc, f"{'.'.join(map(str, path))} retyped/scaled"
    if isinstance(value, list):
        parent[path[-1]] = value * rng.choice([0, 2, 700])
        return doc, f"{'.'.join(map(str, path))} list resized"
    parent[path[-1]] = [value]
    return doc, f"{'.'.join(map(str, path))} wrapped in a list"


# -- specs ---------------------------------------------------------------------------------------------------

YAML_SNIPPETS = [
    "x: !!python/object/apply:os.system ['true']\n",
    "repeats: !!float 2\n",
    "repeats: !!int '3'\n",
    "seed: !!binary aGVsbG8=\n",
    "seed: 2001-12-14\n",
    "defaults: &d {threads: 1, rate: null}\nclient:\n  <<: *d\n",
    "client:\n  <<: 5\n",
    "client:\n  <<: [*nothing]\n",
    "a: &a [*a]\n",
    "--- \n---\n",
    "\t\tname: x\n",
    'name: "\\ud800"\n',
    "? [1, 2]\n: 3\n",
    "{{{{\n",
    "name: x\nname: y\n",
]


def _laughs(levels: int, width: int) -> str:
    lines = ['l0: &l0 ["lol"]']
    for i in range(1, levels + 1):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]")
    lines.append(f"description: *l{levels}")
    return "\n".join(lines) + "\n"


YAML_VERSIONS = ["1.0", "1.1", "1.2", "1.3", "1.9", "2.0"]
#: The spec's string fields a user writes (the name is the file's: it stays).
SPEC_STRING_FIELDS = ["description", "reproduces", "hardware_class", "launcher"]


def spec_variant(rng: random.Random) -> tuple[str, bytes]:
    """A (description, file bytes) variant of a spec; its file must be named after ``name:``."""
    base_path = rng.choice(SPEC_BASES)
    text = base_path.read_text()
    name = yaml.safe_load(text)["name"]
    kind = rng.random()
    if kind < 0.05:  # a %YAML directive: only the version the reader implements (1.1) may be declared
        version = rng.choice(YAML_VERSIONS)
        return f"{name}: %YAML {version}", f"%YAML {version}\n---\n{text}".encode()
    if kind < 0.1:  # a string that is not Unicode text, written as a YAML escape
        doc = yaml.safe_load(text)
        bad = rng.choice(NOT_TEXT)
        if rng.random() < 0.2:
            doc.setdefault("designs", [{}])[0][bad] = 1
            where = "a key of designs[0]"
        else:
            where = rng.choice(SPEC_STRING_FIELDS)
            doc[where] = rng.choice(["", "a spec about ", "x" * 50]) + bad + rng.choice(["", " and more"])
        data = yaml.safe_dump(doc, default_flow_style=None, allow_unicode=True).encode()
        return f"{name}: not text {bad!r} in {where}", data
    if kind < 0.45:
        doc, what = mutate_doc(yaml.safe_load(text), rng)
        if rng.random() < 0.3:
            doc, more = mutate_doc(doc, rng)
            what += "; " + more
        try:
            data = yaml.safe_dump(doc, default_flow_style=None, allow_unicode=True).encode()
        except yaml.YAMLError:
            data = text.encode()
        return f"{name}: {what}", data
    if kind < 0.6:
        snippet = rng.choice(YAML_SNIPPETS)
        lines = text.splitlines(keepends=True)
        at = rng.randrange(len(lines) + 1)
        return f"{name}: snippet {snippet[:30]!r} at line {at}", "".join(
            [*lines[:at], snippet, *lines[at:]]
        ).encode()
    if kind < 0.7:
        depth = rng.choice([20, 33, 100, 2000, 20000])
        flow = rng.random() < 0.5
        nest = (
            "[" * depth + "]" * depth if flow else "".join(" " * i + "- \n" for i in range(min(depth, 3000)))
        )
        return f"{name}: nested {depth} deep", (text + "extra: " + nest + "\n").encode()
    if kind < 0.77:
        levels, width = rng.choice([(3, 3), (5, 9), (9, 9), (20, 2)])
        return f"{name}: alias bomb {levels}x{width}", (text + _laughs(levels, width)).encode()
    if kind < 0.9:
        flipped = bytearray(text.encode())
        for _ in range(rng.randint(1, 6)):
            op = rng.random()
            at = rng.randrange(len(flipped))
            if op < 0.4:
                flipped[at] = rng.randrange(256)
            elif op < 0.7:
                del flipped[at]
            else:
                flipped.insert(at, rng.choice(b":-[]{}&*!|>'\"#%@`\t\n\x00\xff"))
        return f"{name}: bytes flipped", bytes(flipped)
    if kind < 0.95:
        return f"{name}: truncated", text.encode()[: rng.randrange(len(text))]
    size = rng.choice([300 * 1024, 3 * 1024 * 1024])
    return f"{name}: {size} bytes", (text + "# " + "x" * size + "\n").encode()


def not_text(strings: list[tuple[str, str]]) -> list[str]:
    """Where a string is not Unicode text that can be stored: a lone surrogate (no UTF-8 for it) or NUL."""
    out = []
    for where, value in strings:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            out.append(where)
            continue
        if "\x00" in value:
            out.append(where)
    return out


def _strings(value: Any, where: str = "") -> list[tuple[str, str]]:
    """Every string (dictionary keys included) in a JSON-like value, with where it is."""
    if isinstance(value, str):
        return [(where, value)]
    if isinstance(value, dict):
        out = []
        for k, v in value.items():
            if isinstance(k, str):
                out.append((f"{where}.<key>", k))
            out += _strings(v, f"{where}.{k!r}")
        return out
    if isinstance(value, list | tuple):
        return [s for i, v in enumerate(value) for s in _strings(v, f"{where}[{i}]")]
    return []


def _spec_strings(spec: Any) -> list[tuple[str, str]]:
    import dataclasses

    out: list[tuple[str, str]] = []
    for f in dataclasses.fields(spec):
        value = getattr(spec, f.name)
        if f.name == "text":
            continue  # the file's own text: valid UTF-8 by construction (escapes are still escapes)
        if dataclasses.is_dataclass(value):
            out += _spec_strings(value)
        elif isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
            for item in value:
                out += _spec_strings(item)
        else:
            out += _strings(value, f.name)
    return out


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _fixed6(v: float) -> bool:
    return math.isfinite(v) and round(v, 6) == v


def spec_oracle(spec: Any, pairs: Any) -> list[str]:
    """Problems with a spec demuxlab accepted (empty: rightly accepted). Independent of demuxlab.spec."""
    from demuxlab.limits import MAX_RUNS, limits
    from demuxlab.spec import expand_points, run_id, run_order

    lim = limits()
    bad: list[str] = []
    ranges = {(p.pattern, p.notifier): (p.min_threads, p.max_threads) for p in pairs}
    ph = spec.phases
    for label, v in (("warmup_s", ph.warmup_s), ("measure_s", ph.measure_s), ("cooldown_s", ph.cooldown_s)):
        if not (_fixed6(v) and 0 <= v <= lim.max_phase_s):
            bad.append(f"phases.{label} {v!r}")
    if not ph.measure_s > 0:
        bad.append("measure_s not > 0")
    if not (_is_int(spec.repeats) and spec.repeats >= 1):
        bad.append(f"repeats {spec.repeats!r}")
    if not (_is_int(spec.seed) and 0 <= spec.seed < 2**63):
        bad.append(f"seed {spec.seed!r}")
    points = expand_points(spec)
    order = run_order(spec)
    if len(order) > MAX_RUNS:
        bad.append(f"{len(order)} runs")
    keys = set()
    for p in points:
        lo, hi = ranges.get((p.pattern, p.notifier), (1, 0))
        if not (_is_int(p.threads) and lo <= p.threads <= hi):
            bad.append(f"{p.point_key}: threads")
        if not (_fixed6(p.work_us) and 0 <= p.work_us <= lim.max_work_us):
            bad.append(f"{p.point_key}: work_us")
        if not (_is_int(p.connections) and 1 <= p.connections <= min(lim.client_max_conns, lim.max_slots)):
            bad.append(f"{p.point_key}: connections")
        if not (_is_int(p.msg_size) and 1 <= p.msg_size <= min(lim.max_msg_size, lim.client_max_msg)):
            bad.append(f"{p.point_key}: msg_size")
        if not (
            _is_int(p.client_threads) and 1 <= p.client_threads <= min(lim.client_max_threads, p.connections)
        ):
            bad.append(f"{p.point_key}: client threads")
        if p.rate is not None and not (_fixed6(p.rate) and 0 < p.rate <= lim.max_rate):
            bad.append(f"{p.point_key}: rate")
        if p.notifier == "select" and p.connections > 1000:
            bad.append(f"{p.point_key}: select connections")
        keys.add(p.point_key)
    if len(keys) != len(points):
        bad.append("duplicate point keys")
    for line in spec.text.splitlines():
        if line.startswith("%YAML") and line.split()[1:2] != ["1.1"]:
            bad.append(f"{line.strip()!r} read as YAML 1.1")
    bad += [f"{where} is not text" for where in not_text(_spec_strings(spec))]
    # The plan must be standard JSON.
    try:
        json.dumps([{"run_id": run_id(spec, p, r), **p.to_json()} for p, r in order[:2000]], allow_nan=False)
    except ValueError as exc:
        bad.append(f"plan is not JSON: {exc}")
    return bad


# -- records -------------------------------------------------------------------------------------------------


def base_record() -> dict[str, Any]:
    from demuxlab.spec import run_id_of

    record: dict[str, Any] = json.loads(RECORD_BASE.read_text())
    exp = record["experiment"]
    record["run_id"] = run_id_of(
        exp["name"], exp["spec_sha256"], record["point"]["point_key"], record["repeat"]
    )
    return record


def _evidence_variant(record: dict[str, Any], rng: random.Random) -> tuple[str, dict[str, Any]]:
    """An ``ok`` record without the evidence its status claims (or, now and then, with all of it)."""
    client, stats = record["client"], record["stats"]
    samples = client["per_second"]
    edit = rng.choice(
        ["empty", "truncated", "extended", "no client", "no stats", "no throughput", "scaled", "trimmed all",
         "no measure", "failed made ok", "consistent"]
    )  # fmt: skip
    if edit == "empty":
        client["per_second"] = []
    elif edit == "truncated":
        client["per_second"] = samples[: rng.randrange(1, len(samples))]
    elif edit == "extended":
        client["per_second"] = samples + samples[: rng.randrange(1, len(samples))]
    elif edit == "no client":
        record["client"] = None
    elif edit == "no stats":
        record["stats"] = None
    elif edit == "no throughput":
        stats["throughput_msgs_per_s"] = None
    elif edit == "scaled":
        stats["throughput_msgs_per_s"] *= rng.choice([0.0, 0.5, 0.99, 1.01, 2.0, 1000.0])
    elif edit == "trimmed all":
        stats["trimmed_seconds"] = len(samples) + rng.randrange(3)
    elif edit == "no measure":
        record["phases"]["measure_s"] = 0
    elif edit == "failed made ok":
        record.update(client=None, stats=None, failure_reason=None)
    else:  # still the evidence of an ok run: its samples and their mean, over a phase of their length
        n = rng.randrange(1, 30)
        client["per_second"] = [round(rng.uniform(1e3, 1e5), 1) for _ in range(n)]
        record["phases"]["measure_s"] = n + rng.choice([0, 0.25, 0.999])
        stats["trimmed_seconds"] = rng.randrange(n)
        kept = client["per_second"][stats["trimmed_seconds"] :]
        stats["throughput_msgs_per_s"] = sum(kept) / len(kept)
    return f"ok record, evidence: {edit}", record


def _text_variant(record: dict[str, Any], rng: random.Random) -> tuple[str, dict[str, Any]]:
    """A string (or a key) somewhere in the record that is not Unicode text."""
    bad = rng.choice(NOT_TEXT)
    where = rng.choice(
        ["failure_reason", "launcher", "host_pair", "pinning.notes", "hosts.server.hostname",
         "experiment.git_rev", "client.mode", "key of pinning", "key of server"]
    )  # fmt: skip
    if where.startswith("key of "):
        record[where[len("key of ") :]][bad] = 1
    elif where == "pinning.notes":
        record["pinning"]["notes"].append(bad)
    elif "." in where:
        first, *rest = where.split(".")
        target = record[first]
        for part in rest[:-1]:
            target = target[part]
        target[rest[-1]] = "x" + bad
    else:
        record[where] = bad + " y"
    return f"not text {bad!r} in {where}", record


def record_variant(rng: random.Random) -> tuple[str, bytes]:
    record = base_record()
    kind = rng.random()
    if kind < 0.08:
        what, doc = _evidence_variant(record, rng)
        return what, json.dumps(doc).encode()
    if kind < 0.12:
        what, doc = _text_variant(record, rng)
        return what, json.dumps(doc).encode()
    if kind < 0.55:
        doc, what = mutate_doc(record, rng)
        if rng.random() < 0.3:
            doc, more = mutate_doc(doc, rng)
            what += "; " + more
        if rng.random() < 0.3 and isinstance(doc, dict):  # keep the id consistent with the new values
            try:
                from demuxlab.spec import run_id_of

                exp = doc["experiment"]
                doc["run_id"] = run_id_of(
                    exp["name"], exp["spec_sha256"], doc["point"]["point_key"], doc["repeat"]
                )
                what += " (run id recomputed)"
            except Exception:
                pass
        try:
            return what, json.dumps(doc).encode()
        except (TypeError, ValueError):
            return what + " (unserializable, base kept)", json.dumps(record).encode()
    text = json.dumps(record)
    if kind < 0.65:
        key = rng.choice(["repeat", "run_id", "status", "format", "attempt"])
        return f"duplicate key {key}", (text[:-1] + f', "{key}": {json.dumps(record[key])}}}').encode()
    if kind < 0.72:
        token = rng.choice(["NaN", "Infinity", "-Infinity"])
        field = rng.choice(['"drift_rel": ', '"measure_s": ', '"throughput_msgs_per_s": ', '"work_us": '])
        return f"{token} for {field}", text.replace(field, field + token + ', "_x": ', 1).encode()
    if kind < 0.78:
        depth = rng.choice([50, 1000, 100_000])
        return f"nested {depth}", text.replace(
            '"pinning": ', '"pinning": ' + "[" * depth + "]" * depth + ', "_p": ', 1
        ).encode()
    if kind < 0.9:
        data = bytearray(text.encode())
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(data))
            data[at] = rng.choice(b'{}[]",:0123456789-.eE\xff\xc3\x00 ')
        return "bytes flipped", bytes(data)
    if kind < 0.95:
        return "truncated", text.encode()[: rng.randrange(len(text))]
    doc = record
    edit = rng.choice(["experiment", "repeat", "point"])
    if edit == "experiment":
        doc["experiment"]["name"] = "other"
    elif edit == "repeat":
        doc["repeat"] = rng.choice([1, 7, 2**31, 99999])
    else:
        doc["point"]["threads"] = 8
    return f"identity edit: {edit}", json.dumps(doc).encode()


def _finite_everywhere(value: Any) -> bool:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, float) and not math.isfinite(v):
            return False
    return True


def evidence_problems(rec: dict[str, Any]) -> list[str]:
    """What an ``ok`` record lacks of the evidence its status claims: one sample per whole second of the
    measure phase (one for a phase under a second), and a throughput that is the mean of the samples left
    after ``stats.trimmed_seconds`` (within 0.1 %)."""
    if rec.get("status") != "ok":
        return []
    measure = rec["phases"]["measure_s"]
    client = rec.get("client")
    if not isinstance(client, dict):
        return ["ok without the client's result"]
    samples = client.get("per_second") or []
    if not measure > 0 or len(samples) != max(1, math.floor(measure)):
        return [f"ok with {len(samples)} samples over measure_s {measure}"]
    stats = rec.get("stats") or {}
    throughput = stats.get("throughput_msgs_per_s")
    if throughput is None:
        return ["ok without a throughput"]
    kept = samples[stats.get("trimmed_seconds") or 0 :]
    if not kept:
        return ["ok with every sample trimmed"]
    mean = sum(kept) / len(kept)
    if abs(throughput - mean) > 1e-3 * max(mean, 1.0):
        return [f"ok with throughput {throughput} for samples of mean {mean}"]
    return []


def record_oracle(raw: bytes) -> list[str]:
    """Problems with a record demuxlab accepted (empty: rightly accepted). Independent of demuxlab.ingest."""
    from demuxlab.spec import Point, run_id_of

    bad: list[str] = []
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return ["not UTF-8"]
    seen_dup: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in items]
        if len(set(keys)) != len(keys):
            seen_dup.append("dup")
        return dict(items)

    try:
        rec = json.loads(text, object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return ["not JSON"]
    if seen_dup:
        bad.append("duplicate keys")
    if not _finite_everywhere(rec):
        bad.append("non-finite number")
    try:
        p = rec["point"]
        ints = ("threads", "connections", "msg_size", "client_threads")
        if not all(_is_int(p[k]) for k in ints) or not _is_int(rec["repeat"]) or not _is_int(rec["attempt"]):
            bad.append("integer field not an integer")
        key = Point.from_json(p).point_key
        if key != p["point_key"]:
            bad.append("point key does not match fields")
        exp = rec["experiment"]
        if rec["run_id"] != run_id_of(exp["name"], exp["spec_sha256"], p["point_key"], rec["repeat"]):
            bad.append("run id is not its rule")
        if not 0 <= rec["repeat"] < 2**31 - 1:
            bad.append("repeat out of range")
        stats = rec.get("stats") or {}
        client = rec.get("client") or {}
        for label, v in (
            ("stats.throughput", stats.get("throughput_msgs_per_s")),
            ("client.throughput", client.get("throughput_msgs_per_s")),
            ("orchestration_s", rec.get("orchestration_s")),
            ("measure_s", rec["phases"]["measure_s"]),
        ):
            if v is not None and (not isinstance(v, int | float) or isinstance(v, bool) or v < 0):
                bad.append(f"{label} negative or not a number")
        if any(
            (not isinstance(x, int | float)) or isinstance(x, bool) or x < 0
            for x in client.get("per_second") or []
        ):
            bad.append("per_second sample negative")
        for label, v in (client.get("latency_us") or {}).items():
            # null: no latency measured (CONTRACTS.md §5 allows it, as the record schema does)
            if v is not None and (not isinstance(v, int | float) or isinstance(v, bool) or v < 0):
                bad.append(f"latency_us.{label} negative or not a number")
        for role in ("server", "client"):
            facts = (rec.get("hosts") or {}).get(role) or {}
            for k in ("sockets", "cores", "threads_per_core"):
                v = facts.get(k)
                if v is not None and (not _is_int(v) or not 0 <= v < 2**31):
                    bad.append(f"hosts.{role}.{k} does not fit an integer column")
        for name, op in ((rec.get("server") or {}).get("ops") or {}).items():
            for k in ("total_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns"):
                v = op.get(k)
                if v is not None and not (isinstance(v, int | float) and 0 <= v < 2**63):
                    bad.append(f"server.ops.{name}.{k} does not fit a bigint column")
        bad += [f"{where} is not text" for where in not_text(_strings(rec, "record"))]
        bad += evidence_problems(rec)
        started = dt.datetime.fromisoformat(rec["started_at"])
        if rec.get("finished_at") is not None and dt.datetime.fromisoformat(rec["finished_at"]) < started:
            bad.append("finished before started")
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        bad.append(f"oracle could not read the record: {type(exc).__name__}")
    return bad


# -- a stored run, and records of it ingested again ----------------------------------------------------------


def rerun_variant(rng: random.Random) -> tuple[str, bytes]:
    """A valid record of the base run that differs from it as a rerun, a retry or a careless edit would,
    or not at all (the same record, its keys in another order, its hosts' facts collected later)."""
    record = base_record()
    edit = rng.choice(
        ["same", "keys reordered", "collected later", "failed", "attempt 2", "later start", "one sample",
         "latency", "pinning note", "ops", "empty samples", "new throughput"]
    )  # fmt: skip
    if edit == "keys reordered":
        return edit, json.dumps(dict(reversed(list(record.items()))), indent=1).encode()
    if edit == "collected later":
        record["hosts"]["server"]["collected_at"] = "2027-01-01T00:00:00Z"
    elif edit == "failed":
        record.update(status="failed", failure_reason="demux-client: stalled", client=None, stats=None)
    elif edit == "attempt 2":
        record["attempt"] = 2
    elif edit == "later start":
        record["started_at"], record["finished_at"] = "2026-11-22T12:00:00Z", "2026-11-22T12:00:13Z"
    elif edit == "one sample":
        record["client"]["per_second"][0] += 0.5
    elif edit == "latency":
        record["client"]["latency_us"]["p99"] = 99.0
    elif edit == "pinning note":
        record["pinning"]["notes"].append("a note")
    elif edit == "ops":
        record["server"]["ops"] = {}
    elif edit == "empty samples":
        record["client"]["per_second"] = []
    elif edit == "new throughput":
        record["client"]["per_second"] = [x * 1.1 for x in record["client"]["per_second"]]
        record["stats"]["throughput_msgs_per_s"] *= 1.1
    return edit, json.dumps(record).encode()


def table_rows(conn: Any) -> dict[str, list[str]]:
    """Every row of every table of the database as canonical JSON text: a comparison that knows nothing of
    demuxlab.ingest."""
    from sqlalchemy import text

    names = conn.execute(text("select tablename from pg_tables where schemaname = 'public' order by 1"))
    return {
        name: list(conn.execute(text(f'select to_jsonb(t)::text from "{name}" t order by 1')).scalars())
        for (name,) in list(names)
    }


def classify_reingest(path: Path, url: str) -> tuple[str, str]:
    """Ingest ``path`` as ``demuxlab ingest`` does (no --replace) into the database at ``url``, which
    holds the base run: a refusal must leave every table as it was, an acceptance the base run's rows
    (``runs``, ``samples``, ``op_timings``) as they were."""
    from sqlalchemy import create_engine

    from demuxlab.errors import DemuxlabError
    from demuxlab.ingest import ingest_files

    base = base_record()["run_id"]
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            before = table_rows(conn)
        try:
            ingest_files([path], engine=engine)
        except DemuxlabError as exc:
            with engine.connect() as conn:
                if table_rows(conn) != before:
                    return "wrongly_accepted", f"refused, yet the database changed: {exc.message[:200]}"
            if clear_message(exc.message, str(path)):
                return "clear", exc.message
            return "traceback", f"unclear message: {exc.message[:300]!r}"
        except BaseException as exc:
            return "traceback", f"{type(exc).__name__}: {str(exc)[:200]}"
        with engine.connect() as conn:
            after = table_rows(conn)
        if _base_rows(before, base) != _base_rows(after, base):
            return "wrongly_accepted", "the stored run changed without --replace"
        return "accepted", ""
    finally:
        engine.dispose()


def _base_rows(rows: dict[str, list[str]], run_id: str) -> dict[str, list[str]]:
    """The rows of ``rows`` that belong to the run ``run_id`` (runs, samples, op timings)."""
    return {
        t: [r for r in rows.get(t, []) if json.loads(r).get("run_id") == run_id]
        for t in ("runs", "samples", "op_timings")
    }


@contextlib.contextmanager
def scratch_database() -> Iterator[str]:
    """A new database at schema head holding the base record's run; dropped at the end."""
    from sqlalchemy import create_engine

    from bench.common.db import scratch_databases
    from demuxlab.ingest import ingest_run_record

    with scratch_databases("fuzz") as (url,):
        engine = create_engine(url)
        try:
            ingest_run_record(engine, base_record(), source="base.json")
        finally:
            engine.dispose()  # no connection crosses a fork
        yield url


# -- classification ------------------------------------------------------------------------------------------


def clear_message(message: str, source: str) -> bool:
    return "\n" not in message and len(message) <= MAX_MESSAGE and message.startswith(source)


def classify_spec(path: Path, pairs: Any) -> tuple[str, str]:
    """(class, detail) for one spec file: load and plan it as ``validate`` and ``plan`` do."""
    from demuxlab.errors import DemuxlabError
    from demuxlab.spec import load_spec

    try:
        spec = load_spec(path, pairs=pairs)
        problems = spec_oracle(spec, pairs)
    except DemuxlabError as exc:
        if clear_message(exc.message, str(path)):
            return "clear", exc.message
        return "traceback", f"unclear message: {exc.message[:300]!r}"
    except BaseException as exc:
        return "traceback", f"{type(exc).__name__}: {str(exc)[:200]}"
    if problems:
        return "wrongly_accepted", "; ".join(problems[:3])
    return "accepted", ""


def classify_record(path: Path) -> tuple[str, str]:
    from demuxlab.errors import DemuxlabError
    from demuxlab.ingest import load_record

    try:
        load_record(path)
    except DemuxlabError as exc:
        if clear_message(exc.message, str(path)):
            return "clear", exc.message
        return "traceback", f"unclear message: {exc.message[:300]!r}"
    except BaseException as exc:
        return "traceback", f"{type(exc).__name__}: {str(exc)[:200]}"
    problems = record_oracle(path.read_bytes())
    if problems:
        return "wrongly_accepted", "; ".join(problems[:3])
    return "accepted", ""


def contract_pairs() -> list[Any]:
    """The pairs CONTRACTS.md §1 promises (as ``demux-server --list`` prints them); no binary needed."""
    from demuxlab.designs import load_pairs_json

    rows = []
    minimum = {"reactor": 1, "hsha": 2, "lf": 1, "proactor": 2, "multireactor": 1}
    for pattern, low in minimum.items():
        for notifier in ("select", "poll", "epoll-lt", "epoll-et", "uring"):
            rows.append(
                {
                    "pattern": pattern,
                    "notifier": notifier,
                    "min_threads": low,
                    "max_threads": 1 if pattern == "reactor" else 1024,
                }
            )
    rows.append({"pattern": "tpc", "notifier": "none", "min_threads": 1, "max_threads": 1024})
    rows.append({"pattern": "uring", "notifier": "uring", "min_threads": 1, "max_threads": 1024})
    return load_pairs_json(json.dumps(rows))
