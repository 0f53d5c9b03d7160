"""A spec's points, calibration points and randomized run order, and the run id rule (CONTRACTS.md §4).
Pure: a :class:`~demuxlab.spec.model.Spec` in, points and ids out."""

from __future__ import annotations

import hashlib
import itertools
import uuid

from demuxlab.errors import SpecError
from demuxlab.point import Point
from demuxlab.spec.model import Design, Spec
from demuxlab.vocab import CALIBRATION_THREADS

#: Namespace of run ids: ``uuid5(NAMESPACE_URL, "demuxlab:run")``, fixed forever so ids stay stable.
RUN_NAMESPACE = uuid.UUID("bb733ec1-0469-5864-8c8a-8cc4fcd3fe6c")


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

    One per design (every pattern has a model) × notifier × work × connections × size, at the pattern's
    calibration concurrency (:data:`demuxlab.vocab.CALIBRATION_THREADS`: the lowest that runs every role,
    e.g. HSHA's monitor + one worker = 2 threads, LF 1), none when ``calibration.repeats`` is 0.
    """
    if spec.calibration_repeats == 0:
        return []
    points: dict[str, Point] = {}
    for design in spec.designs:
        for notifier in design.notifiers:
            for work_us, connections, msg_size in itertools.product(*_workload_axes(spec, design)):
                point = Point(
                    pattern=design.pattern,
                    notifier=notifier,
                    threads=CALIBRATION_THREADS[design.pattern],
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
    measured = [(p, spec.max_repeats) for p in expand_points(spec)]
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
