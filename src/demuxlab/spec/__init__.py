"""Experiment specs (CONTRACTS.md §4): loading, checking, expanding into points and ordering the runs.

A spec is checked in three layers, and the first problem found is reported as one line
``file: field.path: problem`` (with ``(and N more)`` when there are several):

1. the file and its YAML: a regular file of at most ``limits.MAX_SPEC_BYTES``, safe YAML (no tags
   beyond the core types) with the line number of a syntax error; duplicate keys are errors, not
   silently "last one wins"; merge keys (``<<: *defaults``) work; nesting depth and the node count with
   every alias expanded are bounded (no "billion laughs", no recursive aliases);
2. the JSON schema ``experiment.schema.json`` (:mod:`.schema`), its upper bounds filled in from the
   binaries' own limits (``images/common/demux_limits.h``, :mod:`demuxlab.limits`); integers must be
   integers (``2.0`` is not), every number finite and given with at most the binaries' 6 decimals;
3. facts the schema cannot know: the name equals the file stem, each (pattern, notifier) is listed by
   ``demux-server --list``, thread counts lie in the pair's range, select stays under FD_SETSIZE, client
   threads do not outnumber connections, the sweep holds at most ``limits.MAX_RUNS`` runs.

Error messages quote at most a short excerpt of any value.

The package: :mod:`.model` (the loaded spec, frozen values), :mod:`.problems` (how problems read),
:mod:`.yamltext` (text to document), :mod:`.schema` (JSON schema and the strict validator), :mod:`.check`
(the checks beyond the schema), :mod:`.expand` (points, run order, run ids) are pure; :mod:`.load` reads the
file and puts them together.
"""

from demuxlab.phases import Phases
from demuxlab.point import Point  # what a spec expands into
from demuxlab.spec.check import SELECT_MAX_CONNECTIONS
from demuxlab.spec.expand import (
    RUN_NAMESPACE,
    calibration_points,
    expand_points,
    find_run,
    run_id,
    run_id_of,
    run_order,
)
from demuxlab.spec.load import load_checked_spec, load_spec
from demuxlab.spec.model import ClientSpec, Design, Matrix, Spec
from demuxlab.spec.problems import MAX_PROBLEM_CHARS, excerpt
from demuxlab.spec.schema import StrictValidator, schema, schema_path

__all__ = [
    "MAX_PROBLEM_CHARS",
    "RUN_NAMESPACE",
    "SELECT_MAX_CONNECTIONS",
    "ClientSpec",
    "Design",
    "Matrix",
    "Phases",
    "Point",
    "Spec",
    "StrictValidator",
    "calibration_points",
    "excerpt",
    "expand_points",
    "find_run",
    "load_checked_spec",
    "load_spec",
    "run_id",
    "run_id_of",
    "run_order",
    "schema",
    "schema_path",
]
