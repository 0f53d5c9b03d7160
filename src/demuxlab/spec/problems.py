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


def text_problem(text: str) -> str | None:
    """Why ``text`` is not Unicode text that can be stored and written as UTF-8, or None when it is.

    A lone surrogate (``"\\ud800"`` from a YAML or JSON escape) is not a Unicode scalar value: it cannot be
    encoded as UTF-8, so it could be neither stored nor written out later; U+0000 cannot be stored in
    PostgreSQL's text (nor passed in a C string). The problem names the first such character and shows
    the text around it, escaped (``repr``), so the message itself is printable."""
    if text.isascii():
        at = text.find("\x00")
        if at < 0:
            return None
        what = "U+0000 (NUL), which PostgreSQL text cannot hold"
    else:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            at = exc.start
            what = f"a lone surrogate U+{ord(text[at]):04X}, which is not a Unicode scalar value"
        else:
            at = text.find("\x00")
            if at < 0:
                return None
            what = "U+0000 (NUL), which PostgreSQL text cannot hold"
    start = max(0, at - 20)
    around = text[start : at + 21]
    cut = ("…" if start else "") + repr(around) + ("…" if at + 21 < len(text) else "")
    return f"not Unicode text: {what}, at character {at} of {cut}"


def raise_first(file: str, problems: Sequence[str]) -> None:
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise SpecError(f"{file}: {excerpt(problems[0])}{more}")
