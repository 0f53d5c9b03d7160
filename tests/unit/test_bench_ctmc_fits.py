"""The CTMC validation bench's calibration bookkeeping (bench/fidelity/ctmc_fits.py), pure: which points an
ablation's refitted calibrations predict again."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from bench.fidelity.ctmc_fits import Ablation, CalKey, Fitted, ablate, ablation_rows, cal_key
from bench.fidelity.ctmc_validation import Point


def point(spec: str) -> Point:
    return Point("lf", "epoll-lt", 2, 0.0, 64, 1, 1, None, False, spec=spec)


def test_an_ablation_keeps_another_specs_predictions_of_the_same_workload() -> None:
    # One run of two specs without --calibrate-from: each spec has its own calibration of lf/epoll-lt at
    # 64 connections. Spec a's is refused, so the ablation refits it and predicts a's point again (here:
    # no prediction); b's point keeps its prediction (it was dropped as well when keys ignored the spec).
    a, b = point("a"), point("b")
    assert cal_key(a, False) != cal_key(b, False) and cal_key(a, True) == cal_key(b, True)
    refused = Fitted(None, "refused: the self-check misses by 32 %", [])
    base: dict[CalKey, Fitted] = {cal_key(a, False): refused}
    model = {(a, "calibration"): 90_000.0, (b, "calibration"): 80_000.0, (b, "paper"): 70_000.0}
    seen: list[Mapping[tuple[Any, str], float]] = []

    def refit(part: str, keys: Collection[CalKey]) -> dict[CalKey, Fitted]:
        assert list(keys) == [cal_key(a, False)]
        return {k: refused for k in keys}

    def repredict(fits: Mapping[CalKey, Fitted], keys: Collection[CalKey]) -> dict[tuple[Any, str], float]:
        return {}

    def score(merged: Mapping[tuple[Any, str], float]) -> tuple[float, float, int]:
        seen.append(dict(merged))
        return 0.0, 0.0, len(merged)

    (row,) = ablate(["speed"], base, refit, repredict, model, "calibration", score)
    assert seen == [{(b, "calibration"): 80_000.0, (b, "paper"): 70_000.0}]
    assert row.points == 2 and row.refits == 1
    # Calibrated from another file's runs (--calibrate-from, key spec ""): the key predicts every spec's.
    seen.clear()
    cross = {cal_key(a, True): refused}

    def refit_cross(part: str, keys: Collection[CalKey]) -> dict[CalKey, Fitted]:
        return {k: refused for k in keys}

    ablate(["speed"], cross, refit_cross, repredict, model, "calibration", score)
    assert seen == [{(b, "paper"): 70_000.0}]


def test_the_ablation_table_says_when_no_point_is_left_and_how_many_points_each_row_has() -> None:
    # Leaving out r_z refused every refit (nothing predicted): the row says so, not "nan%"; leaving out
    # "r_n" let refused calibrations fit, so its row is over more points than the full figure's 66.
    full = (0.099, 0.52, 66)
    rows = ablation_rows(
        [Ablation("r_z", 9, 9, float("nan"), float("nan"), 0), Ablation("r_n", 9, 28, 0.085, 0.317, 80)],
        full,
    )
    assert rows[0][2:] == [9, 9, 0, "no point predicted (every refit refused)", "-", "-", "-"]
    assert rows[1][2:] == [9, 28, 80, "8.5%", "31.7%", "-1.4", "-20.3"]
    assert not any("nan" in str(cell) for row in rows for cell in row)
