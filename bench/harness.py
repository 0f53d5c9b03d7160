"""The benchmarks' harness: find them, list them, run one by name.

    .venv/bin/python -m bench                     # list: name, purpose, what it measures
    .venv/bin/python -m bench NAME [OPTIONS...]   # run one (NAME --help: its options)
    make bench                                    # the list;  make bench B=NAME ARGS="OPTIONS"

As asv finds benchmarks by a naming convention, this harness finds them by one: a benchmark is a module of
a purpose folder (:data:`PURPOSES`) with a top-level ``main(argv)``; a module without one is a helper of
its folder (``bench/fuzz/cases.py``), and what every folder shares lives in ``bench/common/``. The modules
are read, not imported, to list them (a benchmark imports its libraries only when it runs). A benchmark
run here is the same as ``python -m bench.PURPOSE.NAME``: its ``main`` through :func:`bench.common.cli.entry`,
which prints its figures, or its bad option as one line and exit 2.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
PURPOSES: dict[str, str] = {
    "perf": "how fast the platform's parts are",
    "fidelity": "how well models and measurements agree",
    "fuzz": "hostile inputs and what demuxlab makes of them",
    "peers": "demuxlab's servers against libuv's and tokio's",
}


@dataclass(frozen=True)
class Bench:
    name: str
    purpose: str
    path: Path
    summary: str  # the first sentence of its docstring

    @property
    def module(self) -> str:
        return f"bench.{self.purpose}.{self.name}"


def _summary(doc: str | None) -> str:
    first = (doc or "").strip().split("\n\n")[0]
    return " ".join(first.split())


def find() -> dict[str, Bench]:
    """Every benchmark, by name (names are unique across the purpose folders)."""
    found: dict[str, Bench] = {}
    for purpose in PURPOSES:
        for path in sorted((HERE / purpose).glob("*.py")):
            if path.name.startswith("_"):
                continue
            tree = ast.parse(path.read_text(), str(path))
            if not any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in tree.body):
                continue  # a helper of the folder
            if path.stem in found:
                raise RuntimeError(
                    f"{path}: a second benchmark named {path.stem!r} ({found[path.stem].path})"
                )
            found[path.stem] = Bench(path.stem, purpose, path, _summary(ast.get_docstring(tree)))
    return found


def listing(benches: dict[str, Bench], columns: int = 110) -> str:
    """The benchmarks by purpose, each with the start of its docstring (cut at a word to ``columns``)."""
    lines = []
    width = max(len(name) for name in benches)
    room = columns - width - 4
    for purpose, what in PURPOSES.items():
        lines.append(f"{purpose}/ ({what}):")
        for b in (b for b in benches.values() if b.purpose == purpose):
            summary = b.summary if len(b.summary) <= room else b.summary[: room - 1].rsplit(" ", 1)[0] + " …"
            lines.append(f"  {b.name:<{width}}  {summary}")
    lines.append("run one: python -m bench NAME [OPTIONS]  (make bench B=NAME ARGS=...; NAME --help)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    benches = find()
    if not args or args[0] in ("-l", "--list"):
        print(listing(benches))
        return 0
    if args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    wanted, rest = args[0], args[1:]
    if wanted not in benches:
        print(
            f"bench: error: no benchmark {wanted!r} (the benchmarks: {', '.join(sorted(benches))})",
            file=sys.stderr,
        )
        return 2
    bench = benches[wanted]
    sys.argv = [str(bench.path), *rest]  # its name in its messages, as with python -m bench.PURPOSE.NAME
    from bench.common.cli import entry  # (demuxlab's errors: not needed to list)

    entry(importlib.import_module(bench.module).main, rest)
