"""How a benchmark talks to its user: its options, its one-line errors, its tables.

Every benchmark builds its parser with :func:`parser` and is started by :func:`entry` (its
``if __name__ == "__main__"`` block, or the harness, :mod:`bench.harness`):

- a bad option, whether argparse finds it (unknown, malformed, missing) or the bench does after parsing
  (``ap.error(...)`` or :class:`OptionError`), is one line ``NAME.py: error: ...`` on stderr and exit 2: no
  usage block, no traceback (``--help`` still shows the usage);
- demuxlab's own errors (:class:`demuxlab.errors.DemuxlabError`: a bad spec, an unknown name) are the same
  one line, with their own exit code (2 for bad input);
- a bench that cannot run (a missing binary, a server that failed) raises :class:`BenchError`: one line,
  exit 1.

``NAME`` is the benchmark's name as ``python -m bench`` lists it (its module's).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from demuxlab.errors import DemuxlabError

Main = Callable[[Sequence[str] | None], int | None]


class BenchError(RuntimeError):
    """A benchmark could not run (missing binary, server failed); printed in one line, exit 1."""

    exit_code = 1


class OptionError(BenchError):
    """An option's value the bench refuses after parsing (it names the option); one line, exit 2."""

    exit_code = 2


def name() -> str:
    """The running benchmark's file name, ``NAME.py`` (``python -m bench.perf.NAME``; the harness sets it
    too)."""
    return Path(sys.argv[0]).name


class Parser(argparse.ArgumentParser):
    """argparse with its error in one line: ``NAME.py: error: message``, exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {one_line(message)}\n")


def parser(doc: str | None) -> Parser:
    """The benchmark's parser: its docstring as the description (kept as written), its name as ``prog``."""
    return Parser(prog=name(), description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def _number(kind: Callable[[str], float], low: float, strict: bool, what: str) -> Callable[[str], float]:
    def convert(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what}, got {text!r}") from None
        if value < low or (strict and value == low) or value != value:
            raise argparse.ArgumentTypeError(f"{what}, got {text!r}")
        return value

    convert.__name__ = what  # argparse names a failed conversion by it
    return convert


# Option types: argparse refuses anything else as "argument --x: <what>, got '...'".
positive_float = _number(float, 0.0, True, "a number > 0")
nonnegative_float = _number(float, 0.0, False, "a number >= 0")
positive_int: Callable[[str], int] = _number(int, 1, False, "an integer >= 1")  # type: ignore[assignment]
nonnegative_int: Callable[[str], int] = _number(int, 0, False, "an integer >= 0")  # type: ignore[assignment]


def int_list(text: str) -> list[int]:
    """A comma list of integers >= 1 ("2,4,6,8")."""
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"a comma list of integers >= 1, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"a comma list of integers >= 1, got {text!r}")
    return values


def one_line(message: str) -> str:
    return "; ".join(part.strip() for part in str(message).splitlines() if part.strip())


def fail(message: str, code: int) -> NoReturn:
    print(f"{name()}: error: {one_line(message)}", file=sys.stderr)
    sys.exit(code)


def entry(main: Main, argv: Sequence[str] | None = None) -> NoReturn:
    """Run a benchmark's ``main`` and exit with its status; its errors become one line (see above)."""
    try:
        code = main(argv)
    except BenchError as exc:
        fail(str(exc), exc.exit_code)
    except DemuxlabError as exc:
        fail(exc.message, exc.exit_code)
    sys.exit(code or 0)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    cells = [[str(h) for h in headers], *[[_fmt(v) for v in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, r in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))
        if n == 0:
            print("  ".join("-" * w for w in widths))


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return f"{v:,.3f}" if abs(v) < 100 else f"{v:,.0f}"
    return str(v)
