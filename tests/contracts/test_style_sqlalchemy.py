"""STYLE.md's SQLAlchemy 2 and Alembic examples (the ORM quickstart, "declarative tables", Alembic's
tutorial) as contracts on src/demuxlab/db/models.py, the migrations and the code that queries.

`alembic check` in CI is tests/db/test_db_schema.py::test_up_down_up_and_check (the migrations at head
and the models agree); it is not repeated here.
"""

from __future__ import annotations

import ast
import datetime as dt
import inspect as inspect_module
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import DateTime, create_engine, inspect
from sqlalchemy.orm import DeclarativeBase, Mapper, configure_mappers

from demuxlab.db.models import Base

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src" / "demuxlab"
MODELS = SRC / "db" / "models.py"


def mappers() -> list[Mapper[Any]]:
    configure_mappers()
    found = sorted(Base.registry.mappers, key=lambda m: m.class_.__name__)
    assert len(found) >= 8
    return found


def annotation(cls: type, key: str) -> str | None:
    """The annotation of `key` as written in the class body (or an ORM base class), as text."""
    for klass in cls.__mro__:
        written = inspect_module.get_annotations(klass)
        if key in written:
            found = written[key]
            return found if isinstance(found, str) else repr(found)
    return None


def test_one_declarative_base() -> None:
    """STYLE.md, SQLAlchemy: "`class Base(DeclarativeBase)`": the models share one Base of the 2.0 style
    (no legacy `declarative_base()` anywhere), and every table of its metadata is a mapped class."""
    assert issubclass(Base, DeclarativeBase)
    assert {m.local_table.name for m in mappers()} == set(Base.metadata.tables)
    legacy = [rel for rel, node in python_nodes() if is_call(node, "declarative_base")]
    assert not legacy, f"declarative_base() in {legacy}"


def test_columns_are_mapped_with_nullability_from_the_annotation() -> None:
    """STYLE.md, SQLAlchemy: "columns as `Mapped[T] = mapped_column(...)`, nullability from `Optional[...]`":
    every column attribute is annotated `Mapped[...]`, and a column is NULLable exactly when its annotation
    says `| None` (or Optional); a primary key never is."""
    checked = 0
    for mapper in mappers():
        cls = mapper.class_
        for prop in mapper.column_attrs:
            written = annotation(cls, prop.key)
            where = f"{cls.__name__}.{prop.key}"
            assert written and written.startswith("Mapped["), f"{where}: not annotated Mapped[...]: {written}"
            optional = "None" in written or "Optional[" in written
            for column in prop.columns:
                expected = optional and not column.primary_key
                assert column.nullable == expected, (
                    f"{where}: nullable={column.nullable}, but the annotation {written} says {expected}"
                )
                checked += 1
    assert checked > 50


def test_relationships_back_populate() -> None:
    """STYLE.md, SQLAlchemy: "relationships with `back_populates`": each relationship names its partner
    (not the implicit `backref`), the partner names it back, and both are annotated `Mapped[...]`."""
    pairs = 0
    for mapper in mappers():
        for rel in mapper.relationships:
            where = f"{mapper.class_.__name__}.{rel.key}"
            assert rel.back_populates, f"{where}: no back_populates"
            assert rel.backref is None, f"{where}: backref"
            partner = rel.mapper.relationships[rel.back_populates]
            assert partner.back_populates == rel.key, (
                f"{where}: its partner points at {partner.back_populates}"
            )
            assert (annotation(mapper.class_, rel.key) or "").startswith("Mapped["), (
                f"{where}: not Mapped[...]"
            )
            pairs += 1
    assert pairs >= 6


def test_type_policy_on_the_base() -> None:
    """STYLE.md, SQLAlchemy: "database type policy on the Base (`type_annotation_map`, `Annotated` reusable
    columns such as a timestamp with a server default)": Python types map to SQL types once, on the Base;
    every timestamp column keeps its time zone; the server's creation timestamp is written once, as an
    `Annotated` column (`created_ts`), and every column stamped by the server is that one."""
    assert dt.datetime in Base.type_annotation_map and str in Base.type_annotation_map
    stamps = 0
    for table in Base.metadata.sorted_tables:
        for column in table.columns:
            if isinstance(column.type, DateTime):
                assert column.type.timezone, f"{table.name}.{column.name}: a timestamp without time zone"
                stamps += 1
    assert stamps >= 4
    source = MODELS.read_text()
    assert source.count("func.now()") == 1, "models.py: server_default=func.now() written more than once"
    reusable = re.search(r"^(\w+) = Annotated\[dt\.datetime, .*server_default=func\.now\(\)", source, re.M)
    assert reusable, "models.py: no Annotated timestamp with a server default"
    stamped = {
        f"{m.class_.__name__}.{prop.key}"
        for m in mappers()
        for prop in m.column_attrs
        if any(c.server_default is not None and isinstance(c.type, DateTime) for c in prop.columns)
    }
    annotated = {
        f"{m.class_.__name__}.{prop.key}"
        for m in mappers()
        for prop in m.column_attrs
        if annotation(m.class_, prop.key) == f"Mapped[{reusable[1]}]"
    }
    assert stamped == annotated and len(annotated) >= 4, (
        f"server-stamped {stamped}, {reusable[1]} {annotated}"
    )


def test_naming_convention_names_every_constraint() -> None:
    """STYLE.md, SQLAlchemy: "A `MetaData(naming_convention=...)` so migrations can name constraints": the
    convention covers every kind, and every constraint and index of the models gets its name from it."""
    convention = Base.metadata.naming_convention
    assert {"ix", "uq", "ck", "fk", "pk"} <= set(convention)
    prefix = {"PrimaryKeyConstraint": "pk_", "UniqueConstraint": "uq_", "CheckConstraint": "ck_"}
    prefix |= {"ForeignKeyConstraint": "fk_", "Index": "ix_"}
    for table in Base.metadata.sorted_tables:
        for item in [*table.constraints, *table.indexes]:
            kind = type(item).__name__
            assert isinstance(item.name, str), f"{table.name}: unnamed {kind}"
            assert item.name.startswith(prefix[kind] + table.name), f"{table.name}: {kind} {item.name}"


def model_constraint_names() -> set[tuple[str, str]]:
    names = set()
    for table in Base.metadata.sorted_tables:
        for item in [*table.constraints, *table.indexes]:
            names.add((table.name, str(item.name)))
    return names


def database_constraint_names(url: str) -> set[tuple[str, str]]:
    engine = create_engine(url)
    try:
        insp = inspect(engine)
        names = set()
        for table in insp.get_table_names():
            if table == "alembic_version":
                continue
            found: list[str | None] = [insp.get_pk_constraint(table)["name"]]
            found += [c["name"] for c in insp.get_unique_constraints(table)]
            found += [c["name"] for c in insp.get_check_constraints(table)]
            found += [c["name"] for c in insp.get_foreign_keys(table)]
            found += [i["name"] for i in insp.get_indexes(table) if not i.get("duplicates_constraint")]
            names |= {(table, str(name)) for name in found}
        return names
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_migrations_name_constraints_by_the_convention(database_url: str) -> None:
    """STYLE.md, SQLAlchemy: "A `MetaData(naming_convention=...)` so migrations can name constraints": the
    database the migrations build (at head) has exactly the constraint and index names the convention gives
    the models, so a later migration can drop or alter any of them by name (`alembic check` compares
    columns and types, not these names)."""
    in_models = model_constraint_names()
    in_database = database_constraint_names(database_url)
    tables = {t for t, _ in in_models}
    in_database = {(t, n) for t, n in in_database if t in tables}  # tables of other models, if any, aside
    assert in_database == in_models, (
        f"only in the database: {sorted(in_database - in_models)}; only in the models: "
        f"{sorted(in_models - in_database)}"
    )


# --- how the code queries -------------------------------------------------------------------------------


def python_nodes() -> Iterator[tuple[str, ast.AST]]:
    for path in sorted(SRC.rglob("*.py")):
        rel = str(path.relative_to(REPO))
        for node in ast.walk(ast.parse(path.read_text())):
            yield rel, node


def is_call(node: ast.AST, name: str) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Name) and func.id == name) or (
        isinstance(func, ast.Attribute) and func.attr == name
    )


def test_sessions_are_context_managers_and_queries_are_select() -> None:
    """STYLE.md, SQLAlchemy: "Sessions as context managers, `select()` with `session.scalars()`": every
    `Session(...)` is opened in a `with`, so it closes on every path; no legacy `session.query(...)` and no
    `Column(...)` outside the ORM's `mapped_column`."""
    opened_in_with: set[int] = set()
    sessions, legacy = [], []
    for rel, node in python_nodes():
        if isinstance(node, ast.With):
            opened_in_with |= {id(item.context_expr) for item in node.items}
        if is_call(node, "Session"):
            sessions.append((rel, node))
        if is_call(node, "query") and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            target = node.func.value
            if isinstance(target, ast.Name) and target.id in {"s", "sess", "session", "db"}:
                legacy.append(f"{rel}:{node.lineno}")
        if is_call(node, "Column") and rel.startswith("src/demuxlab/db/"):
            legacy.append(f"{rel}:{node.lineno} Column()")
    assert sessions, "no Session(...) found: the check looks in the wrong place"
    bare = [f"{rel}:{node.lineno}" for rel, node in sessions if id(node) not in opened_in_with]
    assert not bare, f"Session(...) outside a `with`: {bare}"
    assert not legacy, f"legacy ORM API: {legacy}"
