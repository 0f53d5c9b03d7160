"""A run's ticket (CONTRACTS.md §4a): everything one run job needs of its spec, written once by the plan.

``demuxlab plan`` (and ``demuxlab adaptive next`` for an adaptive round's runs) writes one small JSON file
per run, ``<folder>/<run id>.json``: the run id, the point, the repeat, the phases, the launcher, the
hardware class the spec pins (what placement needs besides the point's thread counts and the hosts'
facts), an adaptive run's steady rule, and the spec's path and SHA-256. A run job (``demuxlab-run
TICKET``, :mod:`demuxlab.runpoint_lean`) reads its ticket and the spec's bytes, and refuses the run in one
line when they no longer hash to the ticket's digest; it never loads, checks or expands the spec again.
``demuxlab run-point SPEC --run-id ID`` builds the same ticket in memory from the loaded spec
(:func:`ticket_doc`, :func:`ticket_from_doc`) and runs it through the same path.

Reading a ticket imports nothing but the standard library, :mod:`demuxlab.point` and
:mod:`demuxlab.phases`: a run process's start-up is paid once per run on the controller of a sweep.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from demuxlab.errors import ConfigError, SpecError
from demuxlab.phases import Phases
from demuxlab.point import Point

if TYPE_CHECKING:
    from demuxlab.spec.model import Spec

TICKET_FORMAT = "demuxlab.ticket/1"
PHASE_FIELDS = ("warmup_s", "measure_s", "cooldown_s")


@dataclass(frozen=True)
class Ticket:
    """One run as the plan wrote it, its spec verified by its digest (``spec_text``: the bytes read)."""

    run_id: str
    experiment: str
    spec: Path  # the spec file, absolute
    spec_path: str  # as run records name it (relative to the repository)
    spec_sha256: str
    spec_text: str
    point: Point
    repeat: int
    phases: Phases
    launcher: str
    hardware_class: str | None  # the class the spec pins its runs to (cluster and Slurm placement)
    steady: tuple[float, float] | None  # an adaptive measured run's (min_s, target_rel); None: whole phase
    source: str  # the ticket file, or "SPEC (run-point)" for one built in memory

    def experiment_section(self, git_rev: str | None) -> dict[str, Any]:
        """The run record's ``experiment`` (CONTRACTS.md §5)."""
        return {
            "name": self.experiment,
            "spec_sha256": self.spec_sha256,
            "git_rev": git_rev,
            "spec_path": self.spec_path,
            "spec_text": self.spec_text,
        }


def ticket_doc(spec: Spec, point: Point, repeat: int, run_id: str, spec_path: str) -> dict[str, Any]:
    """The ticket of run ``run_id`` (``point``, ``repeat``) of a loaded, checked spec. ``spec_path``: how
    the record names the spec (relative to the repository where it lies inside it)."""
    steady = spec.adaptive.steady if spec.adaptive is not None else None
    return {
        "format": TICKET_FORMAT,
        "run_id": run_id,
        "experiment": spec.name,
        "spec": str(Path(spec.path).resolve()),
        "spec_path": spec_path,
        "spec_sha256": spec.sha256,
        "point": point.to_json(),
        "repeat": repeat,
        "phases": spec.phases.to_json(),
        "launcher": spec.launcher,
        "hardware_class": spec.hardware_class,
        # Calibration runs measure their whole phase; an adaptive sweep's measured runs end when steady.
        "steady": None if steady is None or point.instrument else steady.to_json(),
    }


def write_tickets(folder: Path, docs: Iterable[dict[str, Any]]) -> int:
    """Every ticket into ``folder`` (``<run id>.json``), replacing what was there: written beside it first
    and moved into place, so the folder holds one plan's tickets, never a mix or a half. The count."""
    folder = Path(folder)
    staging = folder.with_name(f".{folder.name}.new")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    count = 0
    for doc in docs:
        (staging / f"{doc['run_id']}.json").write_text(json.dumps(doc, indent=1) + "\n")
        count += 1
    old = folder.with_name(f".{folder.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if folder.exists():
        folder.rename(old)
    staging.rename(folder)
    shutil.rmtree(old, ignore_errors=True)
    return count


def read_ticket(path: Path, run_id: str | None = None) -> Ticket:
    """The ticket at ``path``, its spec read and hashed: one line naming the file on any problem (missing,
    not a ticket, another run's, a spec that changed since the plan)."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: ticket not found (`demuxlab plan SPEC --tickets DIR` writes it)"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: ticket unreadable: {str(exc).splitlines()[0]}") from None
    if not isinstance(doc, dict) or doc.get("format") != TICKET_FORMAT:
        raise ConfigError(f"{path}: format: not a {TICKET_FORMAT} document")
    if run_id is not None and doc.get("run_id") != run_id:
        raise ConfigError(f"{path}: run_id: {str(doc.get('run_id'))[:40]!r} is not run {run_id!r}")
    spec_file = Path(str(doc.get("spec")))
    try:
        raw = spec_file.read_bytes()
    except OSError as exc:
        raise SpecError(f"{path}: spec: {spec_file}: cannot read: {exc.strerror}") from None
    return ticket_from_doc(doc, raw, str(path))


def ticket_from_doc(doc: Mapping[str, Any], spec_bytes: bytes, source: str) -> Ticket:
    """A ticket document checked against its spec's bytes (``source`` names it in errors)."""
    digest = hashlib.sha256(spec_bytes).hexdigest()
    expected = str(doc.get("spec_sha256"))
    if digest != expected:
        raise SpecError(
            f"{source}: spec_sha256: {doc.get('spec')} now hashes to {digest}, the ticket's is {expected}: "
            "the spec changed since the plan (rerun the workflow, or `demuxlab plan`)"
        )
    try:
        point = Point.from_json(doc["point"])
        if point.point_key != doc["point"].get("point_key", point.point_key):
            raise ValueError(
                f"point_key {doc['point']['point_key']!r} is not the point's {point.point_key!r}"
            )
        repeat = doc["repeat"]
        if not isinstance(repeat, int) or isinstance(repeat, bool) or repeat < 0:
            raise ValueError(f"repeat {repeat!r} is not a repeat index")
        steady = doc.get("steady")
        return Ticket(
            run_id=str(doc["run_id"]),
            experiment=str(doc["experiment"]),
            spec=Path(str(doc["spec"])),
            spec_path=str(doc["spec_path"]),
            spec_sha256=digest,
            spec_text=spec_bytes.decode("utf-8"),
            point=point,
            repeat=repeat,
            phases=Phases(**{k: float(doc["phases"][k]) for k in PHASE_FIELDS}),
            launcher=str(doc["launcher"]),
            hardware_class=None if doc.get("hardware_class") is None else str(doc["hardware_class"]),
            steady=None if steady is None else (float(steady["min_s"]), float(steady["target_rel"])),
            source=source,
        )
    except KeyError as exc:
        raise ConfigError(f"{source}: {exc.args[0]}: missing from the ticket") from None
    except (TypeError, ValueError, AttributeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{source}: not a valid ticket: {str(exc).splitlines()[0][:200]}") from None
