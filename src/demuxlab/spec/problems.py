"""How a spec's problems read: ``file: field.path: problem``, values cut to a short excerpt."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from demuxlab.errors import SpecError


def field_path(parts: Iterable[str | int]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out or "(top level)"


def path_sort_key(parts: Iterable[str | int]) -> tuple[tuple[int, int, str], ...]:
    return tuple((0, part, "") if isinstance(part, int) else (1, 0, part) for part in parts)


MAX_PROBLEM_CHARS = 240


def excerpt(text: str, limit: int = MAX_PROBLEM_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters (values in messages may be huge)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def raise_first(file: str, problems: Sequence[str]) -> None:
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise SpecError(f"{file}: {excerpt(problems[0])}{more}")
