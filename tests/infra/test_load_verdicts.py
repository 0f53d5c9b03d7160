"""The suite's timing verdicts (tests/helpers/load.py): a late claim fails unless the host's measured stall
could explain it, then it skips; and no test asserts a bare wall-clock bound."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

from helpers.load import Claim, Span, busy_reason, measured_wake, settle, stall_us, under, within

TESTS = Path(__file__).resolve().parents[1]
CLOCKS = {"monotonic", "perf_counter", "time", "monotonic_ns", "perf_counter_ns", "time_ns"}


def span(wall_s: float, stall_s: float | None, load1: float = 0.0) -> Span:
    return Span(wall_s=wall_s, stall_s=stall_s, load1=load1)


def test_stall_is_read_from_the_cpu_and_io_pressure_totals(tmp_path: Path) -> None:
    (tmp_path / "cpu").write_text("some avg10=1.00 avg60=2.00 avg300=3.00 total=1500\nfull avg10=0 total=0\n")
    (tmp_path / "io").write_text("some avg10=0.00 avg60=0.00 avg300=0.00 total=250\nfull avg10=0 total=9\n")
    assert stall_us(tmp_path) == 1750
    (tmp_path / "io").unlink()
    assert stall_us(tmp_path) is None  # a kernel without PSI: the load average stands in


def test_span_measures_wall_and_stall() -> None:
    with Span() as s:
        pass
    assert 0 <= s.wall_s < 60
    assert s.stall_s is None or s.stall_s >= 0
    assert s.load1 >= 0


def test_a_claim_that_holds_passes() -> None:
    within(span(0.5, 0.0), 1.0, "a quick thing")
    settle(span(9.0, 0.0), Claim(True, "held", 5.0))


def test_a_late_claim_the_host_cannot_explain_fails() -> None:
    with pytest.raises(
        AssertionError,
        match=r"a quick thing took \(s\) 3, not under 1 \(2 s late\).*\(0\.50 s\) does not explain",
    ):
        within(span(3.0, 0.5), 1.0, "a quick thing")
    # One unexplained claim fails the test even when another one is explained.
    with pytest.raises(AssertionError, match="far off"):
        settle(span(3.0, 0.5), Claim(False, "near", 0.1), Claim(False, "far off", 2.0))


def test_a_late_claim_the_hosts_stall_explains_is_a_skip_naming_it() -> None:
    with pytest.raises(
        pytest.skip.Exception,
        match=r"took \(s\) 3, not under 1: a quiet host.s bound.*waited 2\.50 s for a CPU",
    ):
        within(span(3.0, 2.5, load1=7.0), 1.0, "a quick thing")


def test_without_pressure_the_load_average_decides() -> None:
    cpus = __import__("os").cpu_count() or 1
    assert busy_reason(span(3.0, None, load1=cpus), 1.0) is not None
    assert busy_reason(span(3.0, None, load1=0.0), 1.0) is None
    claim = under("a latency (ns)", 3_000_000, 1_000_000, unit_s=1e-9)
    assert not claim.holds and claim.late_s == pytest.approx(0.002)
    assert claim.what == "a latency (ns) 3e+06, not under 1e+06"


def test_a_wake_up_not_measured_is_the_hosts_only_when_wake_cost_timed_out() -> None:
    note = "the client's wake-up cost was not measured: wake-cost: "
    assert measured_wake([{"notes": []}, {"wake_us": 17.0, "notes": []}]).holds
    late = measured_wake([{"notes": [note + "Command '['wake-cost']' timed out after 60 seconds"]}])
    assert not late.holds and late.late_s == pytest.approx(59.0)
    broken = measured_wake([{"notes": [note + "wake-cost not found at /x: run `make build`"]}])
    assert not broken.holds and broken.late_s == float("inf")
    with pytest.raises(AssertionError, match="not found"):
        settle(span(100.0, 99.0), broken)  # however busy the host: a missing binary fails
    assert measured_wake([{"notes": []}]).late_s == float("inf")


def timed_names(fn: ast.AST) -> set[str]:
    """Names a function assigns from an expression that reads a clock (``t = time.monotonic() - t0``)."""
    names: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and reads_clock(node.value):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def reads_clock(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in CLOCKS
        for n in ast.walk(node)
    )


def bare_upper_bounds(path: Path, root: Path = TESTS) -> list[str]:
    """``assert`` statements bounding a clock reading from above (``elapsed < 3``, ``5 > now() - t0``),
    as ``file:line`` relative to ``root``."""
    tree = ast.parse(path.read_text())
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        timed = timed_names(fn)

        def is_timed(node: ast.AST, timed: set[str] = timed) -> bool:
            return reads_clock(node) or any(isinstance(n, ast.Name) and n.id in timed for n in ast.walk(node))

        for node in ast.walk(fn):
            if not isinstance(node, ast.Assert):
                continue
            for cmp in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
                operands = [cmp.left, *cmp.comparators]
                for (a, b), op in zip(itertools.pairwise(operands), cmp.ops, strict=True):
                    upper = (isinstance(op, ast.Lt | ast.LtE) and is_timed(a)) or (
                        isinstance(op, ast.Gt | ast.GtE) and is_timed(b)
                    )
                    # `now() < deadline` in a polling loop is a timeout (generous), not a verdict on speed.
                    if any(isinstance(n, ast.Name) and n.id == "deadline" for n in (a, b)):
                        upper = False
                    if upper:
                        found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_the_bound_finder_finds_bare_bounds(tmp_path: Path) -> None:
    src = tmp_path / "test_x.py"
    src.write_text(
        "import time\n"
        "def test_a():\n    t0 = time.monotonic()\n    assert time.monotonic() - t0 < 5\n"
        "def test_b():\n    took = time.monotonic() - 1\n    assert 1.0 <= took\n    assert 3 > took\n"
        "def test_c():\n    took = time.monotonic() - 1\n    assert 1.0 <= took\n"
        "def test_d():\n    deadline = time.monotonic() + 30\n    assert time.monotonic() < deadline\n"
    )
    assert bare_upper_bounds(src, tmp_path) == ["test_x.py:4", "test_x.py:8"]


def test_no_test_bounds_a_clock_reading_with_a_bare_assert() -> None:
    """A duration's upper bound depends on how busy the host is: time the block with helpers.load.Span and
    settle it with ``within``/``settle`` at the end of the test (a busy host's lateness is a skip)."""
    found = [hit for path in sorted(TESTS.rglob("test_*.py")) for hit in bare_upper_bounds(path)]
    assert found == []
