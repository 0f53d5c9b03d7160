"""The vocabulary drives the marks (issue 46): every pattern of :mod:`demuxlab.vocab` its own colour, every
notifier its own dash, marker and hatch, for the vocabulary as it is and for a longer one (a seventh notifier
once silently took another's dash and marker, a ninth pattern a hashed colour); and the rules every figure
shares: the interval, the throughput axis, numbers and log ticks."""

from __future__ import annotations

import importlib
from collections.abc import Iterator

import pytest

from demuxlab import marks, vocab


def _distinct(values: list[object]) -> bool:
    return len(set(values)) == len(values)


def test_every_pattern_and_notifier_has_its_own_marks() -> None:
    assert set(marks.PATTERN_COLOUR) == set(vocab.PATTERNS)
    assert _distinct(list(marks.PATTERN_COLOUR.values())) and marks.GREY not in marks.PATTERN_COLOUR.values()
    for table in (marks.NOTIFIER_DASH_OF, marks.NOTIFIER_SYMBOL, marks.NOTIFIER_HATCH):
        assert set(table) == set(vocab.NOTIFIERS) and _distinct(list(table.values()))
    # a model line never reads as a measured series
    assert not set(marks.SOURCE_DASHES.values()) & set(marks.NOTIFIER_DASH_OF.values())
    # every marker shape is drawn alike by both libraries
    assert all(marks.MPL_MARKER[s] for s in marks.NOTIFIER_SYMBOL.values())


@pytest.fixture
def longer_vocabulary(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The vocabulary with a ninth pattern and a seventh notifier; the marks made again from it."""
    monkeypatch.setattr(vocab, "PATTERNS", (*vocab.PATTERNS, "actor"))
    monkeypatch.setattr(vocab, "NOTIFIERS", (*vocab.NOTIFIERS, "kqueue"))
    importlib.reload(marks)
    from demuxlab.dashboard import style

    importlib.reload(style)
    yield
    monkeypatch.undo()
    importlib.reload(marks)
    importlib.reload(style)


@pytest.mark.usefixtures("longer_vocabulary")
def test_a_new_pattern_and_a_new_notifier_get_their_own_marks() -> None:
    from demuxlab.dashboard import style

    assert marks.PATTERN_COLOUR["actor"] not in list(marks.PATTERN_COLOUR.values())[:-1]
    assert _distinct(list(marks.NOTIFIER_DASH_OF.values()))
    assert _distinct(list(style.NOTIFIER_DASH.values())) and _distinct(list(style.NOTIFIER_SYMBOL.values()))
    assert style.dash_for("kqueue") not in [style.dash_for(n) for n in vocab.NOTIFIERS[:-1]]
    assert style.symbol_for("kqueue") not in [style.symbol_for(n) for n in vocab.NOTIFIERS[:-1]]
    assert style.colour_for("actor") != style.GREY


def test_any_number_of_names_gets_distinct_colours_and_dashes_or_a_clear_refusal() -> None:
    assert _distinct(list(marks.colours(60))) and marks.GREY not in marks.colours(60)
    many = marks.dashes(40)
    assert _distinct(list(many)) and not set(many) & set(marks.SOURCE_DASHES.values())
    shapes = [s for s, _ in marks.SYMBOLS]
    assert _distinct(shapes) and _distinct(list(marks.MPL_MARKER.values()))
    with pytest.raises(ValueError, match="add 1 to SYMBOLS"):
        marks.assign([f"n{i}" for i in range(len(shapes) + 1)], shapes, "vocab.NOTIFIERS", "SYMBOLS")


def test_one_interval_rule() -> None:
    """Drawn from 2 runs on whatever its width, clipped at zero (said), none for one run."""
    two = marks.interval(67_900.0, 7_325.0, 2)
    assert two.drawn and (two.lo, two.hi) == (67_900.0 - 7_325.0, 67_900.0 + 7_325.0) and not two.clipped
    assert "±7.33k over 2 runs" in two.note()
    wide = marks.interval(54_000.0, 372_000.0, 2)
    assert wide.drawn and wide.lo == 0.0 and wide.clipped and wide.minus == 54_000.0
    assert "clipped at 0" in wide.note()
    one = marks.interval(50.0, None, 1)
    assert not one.drawn and one.plus == one.minus == 0.0 and one.note().startswith("1 run: no interval")
    axis = marks.axis_top([54_000.0, 60_000.0], [426_000.0, 61_000.0])
    assert axis.top == pytest.approx(2 * 60_000.0 * marks.AXIS_HEADROOM) and axis.cut == 1
    assert marks.cut_note(axis.cut) is not None and marks.cut_note(0) is None


def test_numbers_read_in_three_or_four_significant_digits_with_units() -> None:
    assert marks.sig(0.002055370354682793) == 0.002055 and marks.sig(2664.4480000000003) == 2664.0
    assert marks.quantity(67_912.3, "msg/s") == "67.9k msg/s" and marks.quantity(691.2, "µs") == "691 µs"
    assert marks.quantity(1.0) == "1" and marks.quantity(0.5) == "0.5"
    assert marks.bytes_text(25_275_990_016) == "23.5 GiB"
    vals, text = marks.log_ticks(0.3, 700)
    assert vals == [0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500]
    assert text == ["0.5", "1", "2", "5", "10", "20", "50", "100", "200", "500"]
    assert marks.log_ticks(1, 1e6)[0] == [1, 10, 100, 1000, 10_000, 100_000, 1_000_000]
    assert marks.dodge(3, 0.6) == pytest.approx([-0.3, 0.0, 0.3]) and marks.dodge(1, 0.6) == [0.0]
