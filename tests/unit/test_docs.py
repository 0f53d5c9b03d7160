"""The docs a newcomer reads first stay true to the code (issue 46): docs/ARCHITECTURE.md's layer map is the
import contract of pyproject.toml, and every reference to a section of the CTMC docs names one that exists."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ARCHITECTURE = REPO / "docs" / "ARCHITECTURE.md"
PACKAGE = REPO / "src" / "demuxlab"


def contract_layers() -> list[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in config if c["id"] == "layers")
    return [" ".join(layer.split()) for layer in layers["layers"]]


def map_rows() -> list[tuple[str, str]]:
    """(layer, modules) per row of ARCHITECTURE.md's layer map, top to bottom; modules as the contract
    writes them (``bundle | dashboard``)."""
    text = ARCHITECTURE.read_text()
    start = text.index("## Layers")
    end = text.index("\n## ", start + 1)
    rows = []
    for line in text[start:end].splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) < 2 or cells[0].startswith("layer") or set(cells[0]) <= {"-"}:
            continue
        rows.append((cells[0], " ".join(cells[1].replace("\\|", "|").replace("`", "").split())))
    return rows


def test_the_layer_map_is_the_import_contract() -> None:
    """Every layer of pyproject's `layers` contract is a row of the map, in its order, with its modules and
    the contract's separators (`|` independent, `:` one way); the map has no other row."""
    assert [modules for _, modules in map_rows()] == contract_layers()


def test_the_layer_map_names_every_top_level_module() -> None:
    """Every module and package of src/demuxlab/ is in the map (the contract is exhaustive, so lint-imports
    refuses one it lacks; this says which row of the map it is missing from)."""
    named = {m for _, modules in map_rows() for m in re.split(r"[|:]", modules)}
    named = {m.strip() for m in named}
    present = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    present |= {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert present - named == set(), f"docs/ARCHITECTURE.md's layer map lacks {sorted(present - named)}"
    assert named - present == set(), f"docs/ARCHITECTURE.md's layer map names {sorted(named - present)}"


# -- the CTMC docs: a guide and its reference ---------------------------------------------------------------

GUIDE = REPO / "docs" / "ctmc.md"
REFERENCE = REPO / "docs" / "ctmc-reference.md"
# Issue 46: the guide is what a newcomer reads at once (the chains, calibration, reading an error): about
# 400 lines; everything else is the reference's.
GUIDE_MAX_LINES = 400
# `docs/ctmc.md, "Section"`, `docs/ctmc-reference.md "Section"` and (names listed) `"A", "B"`.
TEXT_SUFFIXES = {".py", ".md", ".c", ".h", ".sh", ".smk", ".toml", ".yaml", ""}
SECTION_REF = re.compile(r'docs/(ctmc(?:-reference)?\.md)[,:]?\s*((?:"[^"\n]+"(?:,\s*)?)+)')


def sections(path: Path) -> set[str]:
    """A doc's headings and the bold words that open its paragraphs and list items (how its sections are
    named in references: `docs/ctmc.md, "On 16 cores"`)."""
    out = set()
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("#"):
            out.add(line.lstrip("#").strip())
        # a bold or italic lead may wrap onto the next lines
        lead = re.match(r"^\s*(?:[-*]\s+|\d+\.\s+)?(\*\*?)(?=\S)", line)
        if lead:
            text = " ".join(part.strip() for part in lines[i : i + 4])
            mark = re.escape(lead[1])
            found = re.match(rf"^(?:[-*]\s+|\d+\.\s+)?{mark}(.+?){mark}", text)
            if found:
                out.add(found[1])
    return out


def references() -> list[tuple[str, str, str]]:
    """(file referring, doc, section) for every reference to a named section of the CTMC docs in the
    repository's tracked text (a reference may wrap onto the next line)."""
    files = subprocess.run(
        ["git", "-C", str(REPO), "ls-files"], capture_output=True, text=True, check=True
    ).stdout.split()
    out = []
    for name in files:
        path = REPO / name
        if path.suffix not in TEXT_SUFFIXES or not path.is_file() or path == Path(__file__).resolve():
            continue  # this file shows the pattern, it names no section
        text = path.read_text(errors="replace")
        if "docs/ctmc" not in text:
            continue
        flat = re.sub(r"\s*\n\s*(?:#|\*|//)?\s*", " ", text)  # a reference wrapped in a comment or docstring
        for doc, names in SECTION_REF.findall(flat):
            for section in re.findall(r'"([^"]+)"', names):
                out.append((name, doc, section))
    return out


def test_every_reference_to_the_ctmc_docs_names_a_section_there() -> None:
    """A reference `docs/ctmc.md, "Title"` (or `docs/ctmc-reference.md, ...`) names a heading, or a bold
    paragraph lead, of that file: moving a section from the guide to the reference moves its links."""
    found = references()
    assert len(found) >= 20, "the pattern found too few references: it no longer matches how they are written"
    known = {"ctmc.md": sections(GUIDE), "ctmc-reference.md": sections(REFERENCE)}
    # A section is named by its start ("Small populations" for "Small populations: the exact solution …").
    missing = [
        f"{where}: docs/{doc}, {section!r}"
        for where, doc, section in found
        if not any(s == section or s.startswith(section) for s in known[doc])
    ]
    assert not missing, "no such section: " + "; ".join(missing)


def test_the_ctmc_guide_is_short_and_links_its_reference() -> None:
    """The guide stays a guide; the reference keeps the rest, and the guide points to it."""
    guide = GUIDE.read_text()
    assert len(guide.splitlines()) <= GUIDE_MAX_LINES
    assert "ctmc-reference.md" in guide
    for heading in ("The chains", "Calibration", "Reading an error"):
        assert any(s.startswith(heading) for s in sections(GUIDE)), heading


def test_the_guide_names_sections_of_the_reference() -> None:
    """Every section the guide points to, `(reference: "A", "B")` and its closing list, is the reference's."""
    guide = " ".join(GUIDE.read_text().split())
    named = []
    listed = r'reference: ((?:"[^"]+"(?:,? (?:with the later changes in |under )?)?)+)'
    for group in re.findall(listed, guide):
        named += re.findall(r'"([^"]+)"', group)
    closing = guide[guide.index("## In the reference") :]
    named += re.findall(r'"([^"]+)"', closing)
    assert len(named) >= 20
    known = sections(REFERENCE)
    assert [n for n in named if not any(s == n or s.startswith(n) for s in known)] == []
