"""The contracts and their index stay in step: every test of tests/contracts/ quotes the STYLE.md example it
enforces, docs/ARCHITECTURE.md's "Style contracts" section names every one of them beside that example, and
every test the section names elsewhere exists.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent
ARCHITECTURE = REPO / "docs" / "ARCHITECTURE.md"
FIELDS = {"Snakemake", "Ansible", "C", "SQLAlchemy", "Dash", "Python"}
QUOTE = re.compile(r'^STYLE\.md, (\w+): "(.+?)"', re.S)
TEST_REF = re.compile(r"`((?:tests/[\w/]+/)?test_\w+\.py)::(test_\w+)`")


def squeeze(text: str) -> str:
    return " ".join(text.split())


def contract_tests() -> dict[str, str]:
    """{"test_style_x.py::test_name": docstring} for every test function of this folder."""
    found = {}
    for path in sorted(HERE.glob("test_style_*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                found[f"{path.name}::{node.name}"] = ast.get_docstring(node) or ""
    return found


def section() -> str:
    text = ARCHITECTURE.read_text()
    start = text.find("\n## Style contracts")
    assert start >= 0, "docs/ARCHITECTURE.md: no '## Style contracts' section"
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def rows() -> list[str]:
    return [line for line in section().splitlines() if line.startswith("|")]


def quote_parts(docstring: str) -> tuple[str, list[str]]:
    match = QUOTE.match(squeeze(docstring))
    assert match, f"docstring does not open with 'STYLE.md, <field>: \"<example>\"': {docstring[:80]!r}"
    parts = [p.strip(" ,.") for p in match[2].split("...")]
    return match[1], [p for p in parts if p]


def style_md() -> Path | None:
    """STYLE.md from the steering folder `shared/` beside the checkout (or beside one of its parents)."""
    for parent in REPO.parents:
        candidate = parent / "shared" / "STYLE.md"
        if candidate.is_file():
            return candidate
    return None


def test_every_contract_quotes_its_example() -> None:
    """STYLE.md, Python: "tests in a root `tests/`": each contract test opens its docstring with the field
    and the STYLE.md example it enforces."""
    tests = contract_tests()
    assert len(tests) >= 50
    for name, docstring in tests.items():
        field, parts = quote_parts(docstring)
        assert field in FIELDS, f"{name}: field {field!r}"
        assert parts, name


def test_quotes_are_verbatim() -> None:
    """STYLE.md, Python: "tests in a root `tests/`": the quoted examples are STYLE.md's own words (each part
    between `...`), when STYLE.md is beside the checkout (it is in CI's, in `shared/`)."""
    found = style_md()
    if found is None:
        pytest.skip("shared/STYLE.md is not beside this checkout")
    text = squeeze(found.read_text())
    for name, docstring in contract_tests().items():
        for part in quote_parts(docstring)[1]:
            assert part in text, f"{name}: {part!r} is not in STYLE.md"


def test_architecture_names_every_contract_beside_its_example() -> None:
    """STYLE.md, Python: "tests in a root `tests/`": docs/ARCHITECTURE.md's "Style contracts" table names
    every contract test, in a row that quotes the test's example; and it names no contract that is gone."""
    tests = contract_tests()
    named: dict[str, list[str]] = {}
    for row in rows():
        for file, test in TEST_REF.findall(row):
            if "/" not in file:
                named.setdefault(f"{file}::{test}", []).append(squeeze(row))
    missing = sorted(set(tests) - set(named))
    assert not missing, f"docs/ARCHITECTURE.md, Style contracts, does not name: {missing}"
    gone = sorted(set(named) - set(tests))
    assert not gone, f"docs/ARCHITECTURE.md, Style contracts, names tests that do not exist: {gone}"
    for name, docstring in tests.items():
        parts = quote_parts(docstring)[1]
        assert any(all(part in row for part in parts) for row in named[name]), (
            f"{name}: no row naming it quotes {parts}"
        )


def test_tests_named_elsewhere_exist() -> None:
    """STYLE.md, Python: "tests in a root `tests/`": the tests the section names outside tests/contracts/
    (those that already enforced an example before this folder) exist."""
    referenced = [(f, t) for f, t in TEST_REF.findall(section()) if "/" in f]
    assert len(referenced) >= 4
    for file, test in referenced:
        path = REPO / file
        assert path.is_file(), f"docs/ARCHITECTURE.md names {file}, which does not exist"
        defined = {n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)}
        assert test in defined, f"docs/ARCHITECTURE.md names {file}::{test}, which does not exist"
