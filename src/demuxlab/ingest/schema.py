"""The run record's schema (CONTRACTS.md §5, ``"format": "demuxlab.run/1"``), as data.

Structure and bounds only: the per-item checks of the (long) per-second series, the identity checks and
the shaping into rows are :mod:`demuxlab.ingest.record`'s. The point's fields come from
:data:`demuxlab.point.POINT_FIELDS`, the patterns, notifiers and run statuses from :mod:`demuxlab.vocab`.
"""

from __future__ import annotations

from typing import Any

from demuxlab.limits import MAX_RUNS, limits
from demuxlab.point import POINT_FIELDS
from demuxlab.vocab import NOTIFIERS, PATTERNS, RUN_FAILED, RUN_RECORD_FORMAT, RUN_STATUSES

MAX_PHASE_S = limits().max_phase_s
FORMAT = RUN_RECORD_FORMAT

_NUM_OR_NULL: dict[str, Any] = {"type": ["number", "null"]}
_STR_OR_NULL: dict[str, Any] = {"type": ["string", "null"]}
_OBJ_OR_NULL: dict[str, Any] = {"type": ["object", "null"]}
BIGINT_MAX = 2**63 - 1
_COUNT: dict[str, Any] = {"type": "integer", "minimum": 0, "maximum": BIGINT_MAX}
INT_MAX = 2**31 - 1
_NONNEG_OR_NULL: dict[str, Any] = {"type": ["number", "null"], "minimum": 0}
# Stored in bigint columns (rounded): bounded like them.
_NS_OR_NULL: dict[str, Any] = {"type": ["number", "null"], "minimum": 0, "maximum": BIGINT_MAX}
_SMALL_COUNT_OR_NULL: dict[str, Any] = {"type": ["integer", "null"], "minimum": 0, "maximum": INT_MAX}
_CPU_S: dict[str, Any] = {
    "type": ["object", "null"],
    "properties": {"user": {"type": "number", "minimum": 0}, "sys": {"type": "number", "minimum": 0}},
}
_FACTS: dict[str, Any] = {
    "type": ["object", "null"],
    "required": ["hostname"],
    "properties": {
        "hostname": {"type": "string", "minLength": 1},
        # Stored in integer columns of hosts.
        "numa_nodes": {"type": ["array", "integer", "null"], "minimum": 0, "maximum": INT_MAX},
        "sockets": _SMALL_COUNT_OR_NULL,
        "cores": _SMALL_COUNT_OR_NULL,
        "threads_per_core": _SMALL_COUNT_OR_NULL,
    },
}
_OP: dict[str, Any] = {
    "type": "object",
    "required": ["count"],
    "properties": {
        "count": _COUNT,
        "mean_ns": _NONNEG_OR_NULL,
        **{k: _NS_OR_NULL for k in ("total_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns")},
    },
}

# The kernel's counters of a side over the measure phase (CONTRACTS.md §5, ``costs``;
# demuxlab.launch.counters): every delta is of a counter that only grows, so none is negative; what the host
# could not give is a string ``unavailable: <why>``, never a number.
_UNAVAILABLE: dict[str, Any] = {"type": "string", "pattern": "^unavailable: "}
_COUNT_OR_UNAVAILABLE: dict[str, Any] = {"anyOf": [_COUNT, _UNAVAILABLE]}
_SECONDS: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "number", "minimum": 0}}
_COUNTS: dict[str, Any] = {"type": "object", "additionalProperties": _COUNT}
_SIDE_COSTS: dict[str, Any] = {
    "anyOf": [
        _UNAVAILABLE,
        {
            "type": "object",
            "required": ["interval_s"],
            "properties": {
                "interval_s": {"type": "number", "minimum": 0},
                "process_cpu_s": {"anyOf": [_SECONDS, _UNAVAILABLE]},
                "context_switches": _COUNTS,
                "migrations": _COUNT_OR_UNAVAILABLE,
                "syscalls": _COUNT_OR_UNAVAILABLE,
                "syscalls_source": {"type": "string"},
                "syscalls_interval_s": {"type": ["number", "null"], "minimum": 0},
                "syscalls_kernel": _COUNT_OR_UNAVAILABLE,
                "cycles": _COUNT_OR_UNAVAILABLE,
                "instructions": _COUNT_OR_UNAVAILABLE,
                "threads": {"type": "array", "maxItems": 4096},
                "cpu_time_s": {"anyOf": [_SECONDS, _UNAVAILABLE]},
                "tcp": {"anyOf": [_COUNTS, _UNAVAILABLE]},
                "frequency_khz": {"anyOf": [{"type": "object"}, _UNAVAILABLE]},
                "governor": {"type": "string"},
                "turbo": {"anyOf": [{"type": "boolean"}, _UNAVAILABLE]},
                "energy_uj": {"anyOf": [_COUNTS, _UNAVAILABLE]},
            },
        },
    ]
}
_COSTS: dict[str, Any] = {
    "type": ["object", "null"],
    "properties": {
        "phases": {"type": "array", "items": {"enum": ["measure", "cooldown"]}, "maxItems": 2},
        "server": _SIDE_COSTS,
        "client": _SIDE_COSTS,
        "same_netns": {"type": "boolean"},
    },
}

# The point's fields (demuxlab.point.POINT_FIELDS; tests/unit/test_vocab.py checks they are the same), each
# bounded by the binaries' limits, as for specs (demuxlab.limits), its names the vocabulary's: the database
# keeps no list of them (no check constraint), so a new pattern or notifier is storable once vocab names it.
POINT_PROPERTIES: dict[str, Any] = {
    "pattern": {"type": "string", "enum": list(PATTERNS)},
    "notifier": {"type": "string", "enum": list(NOTIFIERS)},
    "threads": {"type": "integer", "minimum": 1, "maximum": limits().max_threads},
    "work_us": {"type": "number", "minimum": 0, "maximum": limits().max_work_us},
    "connections": {"type": "integer", "minimum": 1, "maximum": limits().connections},
    "msg_size": {"type": "integer", "minimum": 1, "maximum": limits().msg_size},
    "client_threads": {"type": "integer", "minimum": 1, "maximum": limits().client_max_threads},
    "rate": {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": limits().max_rate},
    "instrument": {"type": "boolean"},
}

# Structure only; per-item checks of the (long) per-second series are done by hand, jsonschema is too slow.
RECORD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": [
        "format",
        "run_id",
        "experiment",
        "point",
        "repeat",
        "attempt",
        "status",
        "started_at",
        "phases",
    ],
    "properties": {
        "format": {"const": FORMAT},
        "run_id": {"type": "string"},
        "experiment": {
            "type": "object",
            "required": ["name", "spec_sha256"],
            "properties": {
                "name": {"type": "string", "pattern": "^[a-z0-9-]+$"},
                "spec_sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                "git_rev": _STR_OR_NULL,
                "spec_path": _STR_OR_NULL,
                "spec_text": _STR_OR_NULL,
            },
        },
        "point": {
            "type": "object",
            # Every field of a point; ``instrument`` may be absent (records written before calibration
            # points existed: a measured point).
            "required": ["point_key", *(f for f in POINT_FIELDS if f != "instrument")],
            "properties": {"point_key": {"type": "string", "minLength": 1}, **POINT_PROPERTIES},
        },
        # Bounded like a spec's sweep (a repeat index is below its repeats) and PostgreSQL's integer.
        "repeat": {"type": "integer", "minimum": 0, "maximum": MAX_RUNS - 1},
        "attempt": {"type": "integer", "minimum": 1, "maximum": 1000},
        "launcher": _STR_OR_NULL,
        "host_pair": _STR_OR_NULL,
        "status": {"enum": list(RUN_STATUSES)},
        "failure_reason": _STR_OR_NULL,
        "started_at": {"type": "string"},
        "finished_at": _STR_OR_NULL,
        "phases": {
            "type": "object",
            "required": ["warmup_s", "measure_s", "cooldown_s"],
            "properties": {
                k: {"type": "number", "minimum": 0, "maximum": MAX_PHASE_S}
                for k in ("warmup_s", "measure_s", "cooldown_s")
            },
        },
        "hosts": {"type": ["object", "null"], "properties": {"server": _FACTS, "client": _FACTS}},
        "pinning": {
            "type": ["object", "null"],
            "properties": {
                "oversubscribed": {"type": ["boolean", "null"]},
                "same_host": {"type": ["boolean", "null"]},
                **{
                    side: {
                        "type": ["array", "null"],
                        "maxItems": 65536,
                        "items": {"type": "integer", "minimum": 0, "maximum": INT_MAX},
                    }
                    for side in ("server_cpus", "client_cpus")
                },
            },
        },
        "artifacts": {
            "type": ["object", "null"],
            "properties": {"server": _OBJ_OR_NULL, "client": _OBJ_OR_NULL},
        },
        "server": {
            "type": ["object", "null"],
            "properties": {
                "messages": _COUNT,
                "cpu_s": _CPU_S,
                "ops": {"type": "object", "additionalProperties": _OP, "maxProperties": 256},
                "notify_by_events": {
                    "type": "array",
                    "maxItems": 4096,
                    "items": {
                        "type": "object",
                        "required": ["events", "count", "mean_ns"],
                        "properties": {
                            "events": {"type": "integer", "minimum": 0, "maximum": INT_MAX},
                            "count": _COUNT,
                            "mean_ns": _NONNEG_OR_NULL,
                        },
                    },
                },
            },
        },
        "client": {
            "type": ["object", "null"],
            "properties": {
                "throughput_msgs_per_s": _NONNEG_OR_NULL,
                "messages": _COUNT,
                "per_second": {"type": "array", "maxItems": MAX_PHASE_S + 1},
                # Latencies in microseconds: none negative.
                "latency_us": {"type": ["object", "null"], "additionalProperties": _NONNEG_OR_NULL},
                # Open loop: how late the client sent against its schedule (CONTRACTS.md §2).
                "lateness_us": {"type": ["object", "null"], "additionalProperties": _NONNEG_OR_NULL},
                "spin_s": _NONNEG_OR_NULL,
                # Open loop: the schedule's gaps in 16 bins an exponential fills alike (demuxlab.validity).
                "gap_bins": {"type": ["array", "null"], "items": _COUNT, "minItems": 16, "maxItems": 16},
                "cpu_s": _CPU_S,
                "errors": _COUNT,
            },
        },
        "stats": {
            "type": ["object", "null"],
            "properties": {
                "throughput_msgs_per_s": _NONNEG_OR_NULL,
                "stationary": {"type": ["boolean", "null"]},
                "drift_rel": _NUM_OR_NULL,
                # Leading samples left out of the throughput (demuxlab.stats.leading_transient).
                "trimmed_seconds": {"type": ["integer", "null"], "minimum": 0, "maximum": MAX_PHASE_S},
            },
        },
        "orchestration_s": _NONNEG_OR_NULL,
        "costs": _COSTS,
        # Cluster runs: the pair (with its hardware class) and the noise check of both hosts.
        "pair": {
            "type": ["object", "null"],
            "properties": {
                "hardware_class": {
                    "type": ["object", "null"],
                    "properties": {"id": {"type": "string", "minLength": 1}},
                }
            },
        },
        "noise": {"type": ["object", "null"], "properties": {"flagged": {"type": "boolean"}}},
        # Slurm runs: the job that ran the run (its id fits PostgreSQL's bigint).
        "slurm": {
            "type": ["object", "null"],
            "properties": {"job_id": {"type": "integer", "minimum": 1, "maximum": 2**63 - 1}},
        },
    },
    "allOf": [
        {
            "if": {"required": ["status"], "properties": {"status": {"const": RUN_FAILED}}},
            "then": {
                "required": ["failure_reason"],
                "properties": {"failure_reason": {"type": "string", "minLength": 1}},
            },
        }
    ],
}

# A record is a page of JSON plus one sample per second: generous, but not unbounded.
MAX_RECORD_BYTES = 4 * 1024 * 1024  # a day of per-second samples is about 1 MiB
MAX_RECORD_DEPTH = 64
