"""STYLE.md's Dash examples (the multi-page demos and dash-sample-apps) as contracts on the dashboard
(src/demuxlab/dashboard/, dashboard/app.py). The checks read the source (ast): they need no database and no
browser; tests/dashboard/ runs the app itself.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "src" / "demuxlab" / "dashboard"
PAGES = sorted(p for p in (DASHBOARD / "pages").glob("*.py") if p.name != "__init__.py")
FRAME = DASHBOARD / "app.py"
ENTRY = REPO / "dashboard" / "app.py"
# Lines of a callback's body (its signature is as long as its inputs): past this it does work that a
# figure or data function should do.
MAX_CALLBACK_LINES = 60
ID_FUNCTIONS = {"Input", "Output", "State"}
ID_HELPERS = re.compile(r"\w+_block$")  # common.figure_block(id), common.table_block(id)
FRAME_PREFIX = "frame-"


def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


def rel(path: Path) -> str:
    return str(path.relative_to(REPO))


def name_of(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def calls(node: ast.AST, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Call) and name_of(n.func) == name]


def imports(module: ast.Module) -> set[str]:
    found = set()
    for node in ast.walk(module):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return found


def is_callback(function: ast.FunctionDef) -> bool:
    return any(
        name_of(d.func if isinstance(d, ast.Call) else d) in {"callback", "clientside_callback"}
        for d in function.decorator_list
    )


def callbacks(module: ast.Module) -> list[ast.FunctionDef]:
    return [n for n in ast.walk(module) if isinstance(n, ast.FunctionDef) and is_callback(n)]


# --- the frame ----------------------------------------------------------------------------------------


def test_app_is_the_frame_only() -> None:
    """STYLE.md, Dash: "`app.py` is the frame only: `Dash(__name__, use_pages=True)`": the app is made with
    pages on, and app.py defines no page callback and builds no figure (it imports no figure module)."""
    frame = tree(FRAME)
    made = calls(frame, "Dash")
    assert len(made) == 1
    keywords = {k.arg: k.value for k in made[0].keywords}
    assert isinstance(keywords.get("use_pages"), ast.Constant) and keywords["use_pages"].value is True
    assert not callbacks(frame), f"{rel(FRAME)} defines callbacks: {[f.name for f in callbacks(frame)]}"
    assert not calls(frame, "callback") and not calls(frame, "clientside_callback")
    builders = sorted(i for i in imports(frame) if ".figures" in i or "plotly" in i)
    assert not builders, f"{rel(FRAME)} imports {builders}"


def test_nav_from_the_page_registry() -> None:
    """STYLE.md, Dash: "a nav built from the page registry": the frame's links take their paths from
    `dash.page_registry`, so a page's path is written once (in its register_page)."""
    frame = tree(FRAME)
    function = next(n for n in frame.body if isinstance(n, ast.FunctionDef) and n.name == "frame")
    links = calls(function, "Link")
    assert links, "frame() makes no dcc.Link"
    uses_registry = any(
        isinstance(n, ast.Attribute) and n.attr == "page_registry" for n in ast.walk(function)
    )
    assert uses_registry, "frame() builds its links without dash.page_registry"
    hrefs = [k.value for link in links for k in link.keywords if k.arg == "href"]
    literal = [ast.unparse(h) for h in hrefs if isinstance(h, ast.Constant)]
    assert not literal, f"frame() links to literal paths {literal}"


def test_server_for_a_wsgi_server() -> None:
    """STYLE.md, Dash: "`server = app.server` for a WSGI server": the top-level entry exposes the Flask
    server (`waitress-serve dashboard.app:server`)."""
    entry = tree(ENTRY)
    assigned = [
        n
        for n in entry.body
        if isinstance(n, ast.Assign) and [ast.unparse(t) for t in n.targets] == ["server"]
    ]
    assert assigned and ast.unparse(assigned[0].value) == "app.server", (
        f"{rel(ENTRY)}: no `server = app.server`"
    )


# --- the pages ------------------------------------------------------------------------------------------


def page_name(path: Path) -> str:
    return path.stem


@pytest.mark.parametrize("page", PAGES, ids=page_name)
def test_one_page_per_module(page: Path) -> None:
    """STYLE.md, Dash: "One page per module with `register_page`, its layout and its callbacks side by
    side": each module under pages/ registers itself once (with `__name__`) at the top, and defines its
    `layout`."""
    module = tree(page)
    registered = calls(module, "register_page")
    assert len(registered) == 1, f"{rel(page)}: {len(registered)} register_page calls"
    first = registered[0].args[0] if registered[0].args else None
    assert isinstance(first, ast.Name) and first.id == "__name__", (
        f"{rel(page)}: register_page(__name__, ...)"
    )
    assert any(
        isinstance(n, ast.Expr) and isinstance(n.value, ast.Call) and name_of(n.value.func) == "register_page"
        for n in module.body
    ), f"{rel(page)}: register_page is not at the module's top level"
    assert any(isinstance(n, ast.FunctionDef) and n.name == "layout" for n in module.body), (
        f"{rel(page)}: no layout"
    )


@pytest.mark.parametrize("page", PAGES, ids=page_name)
def test_layout_is_a_function_of_the_url(page: Path) -> None:
    """STYLE.md, Dash: "layouts as functions of URL parameters so views are shareable links": `layout` is
    a function whose every parameter has a default (any subset of the query string renders), and a page
    with parameters reads them through `common.page_layout`, which checks each one."""
    module = tree(page)
    layout = next(n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "layout")
    args = layout.args
    named = args.args + args.kwonlyargs
    defaults = len(args.defaults) + sum(d is not None for d in args.kw_defaults)
    assert defaults == len(named), f"{rel(page)}: layout has parameters without a default"
    if named:
        decorators = [name_of(d.func) for d in layout.decorator_list if isinstance(d, ast.Call)]
        assert "page_layout" in decorators, f"{rel(page)}: layout takes {[a.arg for a in named]} unchecked"


def component_ids(module: ast.Module) -> Iterator[tuple[int, str, str]]:
    """(line, how, id's fixed prefix) of every component id the module defines or refers to."""

    def fixed(value: ast.expr) -> str | None:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return value.value
        if isinstance(value, ast.JoinedStr) and value.values and isinstance(value.values[0], ast.Constant):
            return str(value.values[0].value)
        if isinstance(value, ast.Dict):  # a pattern-matching id: its "type" carries the page's prefix
            for key, item in zip(value.keys, value.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "type":
                    return fixed(item)
        return None

    for node in ast.walk(module):
        if not isinstance(node, ast.Call):
            continue
        for keyword in node.keywords:
            if keyword.arg == "id" and (text := fixed(keyword.value)) is not None:
                yield node.lineno, "id=", text
        function = name_of(node.func)
        takes_id = function in ID_FUNCTIONS or ID_HELPERS.fullmatch(function)
        if takes_id and node.args and (text := fixed(node.args[0])) is not None:
            yield node.lineno, function, text


@pytest.mark.parametrize("page", PAGES, ids=page_name)
def test_component_ids_prefixed_by_the_page(page: Path) -> None:
    """STYLE.md, Dash: "component ids prefixed by the page's name": every id a page defines starts with
    `<page>-` (ids are global in Dash: two pages cannot collide); a page may read the frame's ids
    (`frame-...`) in an Input or State, never define or write them."""
    prefix = page_name(page) + "-"
    wrong = []
    for line, how, text in component_ids(tree(page)):
        reads_frame = how in {"Input", "State"} and text.startswith(FRAME_PREFIX)
        if not text.startswith(prefix) and not reads_frame:
            wrong.append(f"line {line}: {how} {text!r}")
    assert not wrong, f"{rel(page)}: ids not prefixed {prefix!r}: {wrong}"


def test_frame_ids_prefixed() -> None:
    """STYLE.md, Dash: "component ids prefixed by the page's name": the frame's own ids (app.py) start with
    `frame-`, so no page's id can collide with them."""
    wrong = [f"line {line}: {text!r}" for line, how, text in component_ids(tree(FRAME)) if how == "id="]
    wrong = [w for w in wrong if f"'{FRAME_PREFIX}" not in w]
    assert not wrong, f"{rel(FRAME)}: {wrong}"


def test_the_id_check_can_fail() -> None:
    """STYLE.md, Dash: "component ids prefixed by the page's name": the id scan sees ids written as
    keywords, in Input/Output, in f-strings and in pattern-matching dicts."""
    source = (
        'html.Div(id="other-x")\nOutput("graph", "figure")\nhtml.Div(id=f"sweep-{n}")\n'
        'html.Div(id={"type": "tab", "index": 1})\ncommon.figure_block("plot")\n'
    )
    found = [text for _, _, text in component_ids(ast.parse(source))]
    assert found == ["other-x", "graph", "sweep-", "tab", "plot"]


# --- callbacks small, figures built by functions tests call ------------------------------------------


def test_callbacks_stay_small() -> None:
    """STYLE.md, Dash: "Callbacks stay small and hand off to figure-building functions": no callback body
    of a page is longer than MAX_CALLBACK_LINES lines."""
    long = []
    found = 0
    for page in PAGES:
        for function in callbacks(tree(page)):
            found += 1
            lines = (function.end_lineno or function.lineno) - function.body[0].lineno + 1
            if lines > MAX_CALLBACK_LINES:
                long.append(f"{rel(page)}: {function.name} ({lines} lines)")
    assert found >= 10
    assert not long, f"callbacks over {MAX_CALLBACK_LINES} lines: {long}"


@pytest.mark.parametrize("page", PAGES, ids=page_name)
def test_pages_build_no_figure_and_run_no_query(page: Path) -> None:
    """STYLE.md, Dash: "Callbacks stay small and hand off to figure-building functions": a page imports no
    plotting library (figures are built in dashboard/figures/) and no database library (queries are in
    dashboard/data/)."""
    imported = imports(tree(page))
    wrong = sorted(
        i for i in imported if i.split(".")[0] in {"plotly", "matplotlib", "sqlalchemy", "psycopg"}
    )
    assert not wrong, f"{rel(page)} imports {wrong}"


def builders_used_by_pages() -> dict[str, set[str]]:
    """{builder name: pages} for the `*_figure` and `*_table` functions pages take from dashboard/figures."""
    used: dict[str, set[str]] = {}
    for page in PAGES:
        module = tree(page)
        aliases = {
            alias.asname or alias.name
            for node in module.body
            if isinstance(node, ast.ImportFrom)
            and (node.module or "").startswith("demuxlab.dashboard.figures")
            for alias in node.names
        }
        for node in ast.walk(module):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.endswith(("_figure", "_table"))
            ):
                used.setdefault(node.attr, set()).add(page.name)
    return used


def test_figure_builders_are_called_by_tests() -> None:
    """STYLE.md, Dash: "Callbacks ... hand off to figure-building functions that tests can call directly":
    every `*_figure` / `*_table` builder a page uses is called directly by a test outside this folder."""
    used = builders_used_by_pages()
    assert len(used) >= 10
    tests = "\n".join(
        p.read_text() for p in sorted((REPO / "tests").rglob("*.py")) if "contracts" not in p.parts
    )
    untested = sorted(
        f"{name} ({', '.join(sorted(pages))})"
        for name, pages in used.items()
        if not re.search(rf"\b{name}\(", tests)
    )
    assert not untested, f"figure builders no test calls: {untested}"
