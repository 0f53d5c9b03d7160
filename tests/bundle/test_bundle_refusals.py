"""Refused calibrations through a bundle's dump and import (``demuxlab.bundle.dump``), on real PostgreSQL.

A refusal (method ``refused``) for want of runs has no source runs, so (pattern, notifier, method, source
runs) does not tell two experiments' refusals of one design apart: the import must key them by experiment,
spec hash and hardware class, as ``validation.store.save_refusal`` stores them.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from demuxlab.bundle import dump
from demuxlab.validation.store import refusal_reasons, save_refusal

pytestmark = pytest.mark.postgres

A, B = "aa" * 32, "bb" * 32
NO_RUNS = "no successful calibration run"


def refusals(url: str) -> list[tuple[str, str, str, str, str]]:
    """(experiment, pattern, notifier, hardware class or "", error) of every stored refusal, sorted."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            c = dump.table("calibrations")
            rows = conn.execute(select_refused(c)).all()
    finally:
        engine.dispose()
    return sorted(
        (
            r.artifacts["experiment"],
            r.pattern,
            r.notifier,
            r.artifacts.get("hardware_class", ""),
            r.artifacts["error"],
        )
        for r in rows
    )


def select_refused(c: sa.Table) -> sa.Select[Any]:
    return sa.select(c.c.pattern, c.c.notifier, c.c.artifacts).where(c.c.method == "refused")


def exported(url: str, experiment: tuple[str, str]) -> dict[str, list[dict[str, Any]]]:
    """What a bundle of ``experiment`` carries of the database, through its Parquet files."""
    engine = sa.create_engine(url)
    try:
        d = dump.dump(engine, [experiment])
    finally:
        engine.dispose()
    return dump.read_parquet(d.files)


def imported(url: str, rows: dict[str, list[dict[str, Any]]]) -> None:
    engine = sa.create_engine(url)
    try:
        dump.load(engine, rows)
    finally:
        engine.dispose()


def test_two_experiments_refusals_of_one_design_both_survive_an_import(
    database_url: str, fresh_url: str
) -> None:
    # The target holds experiment a's refusals; the bundle is experiment b's, of the same designs.
    for klass in (None, "small"):
        save_refusal("lf", "epoll-lt", [], experiment="a", spec_sha256=A, error=NO_RUNS, hardware_class=klass)
        save_refusal(
            "lf", "epoll-lt", [], experiment="b", spec_sha256=B, error="refused: b's", hardware_class=klass,
            url=fresh_url,
        )  # fmt: skip
    before, reasons_a = refusals(database_url), refusal_reasons(A, database_url)
    bundle = exported(fresh_url, ("b", B))
    assert len(bundle["calibrations"]) == 2
    imported(database_url, bundle)
    after = refusals(database_url)
    assert after == sorted(before + refusals(fresh_url)), after
    assert refusal_reasons(A, database_url) == reasons_a  # a's, untouched
    assert set(refusal_reasons(B, database_url)) == {("lf", "epoll-lt")}
    # Importing again matches b's own refusals (each class its own): nothing is added or overwritten.
    imported(database_url, bundle)
    assert refusals(database_url) == after
