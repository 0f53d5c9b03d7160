"""Every address answered: the query string's values checked before a page uses them. Pure (no Dash).

A browser, a copied link or a hand-typed URL can hand a page anything: a NUL byte (``%00``: PostgreSQL
refuses it in text, which used to surface as a 500), other control characters, a value of 20,000
characters (echoed as is it made the page 189,421 px wide), a key given twice (Dash passes a list). Each
page's ``layout`` takes its keys through :func:`check`: a usable value passes, anything else is dropped
(the page falls back to its default) and named in one short line with the value cut to a readable
excerpt (:func:`excerpt`), shown above the page. Nothing here raises.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: The longest value any key of the dashboard takes (an experiment's ``name@sha256``, a run's UUID, a
#: thread list): longer values are not names of anything.
MAX_VALUE_CHARS = 200
#: How much of a refused value a message quotes.
EXCERPT_CHARS = 40
#: How many characters of a server build's id (binary SHA-256, image digest) addresses carry and the
#: pages show in their choices: enough to tell builds apart, short enough to read.
BUILD_CHARS = 19


def excerpt(value: Any, limit: int = EXCERPT_CHARS) -> str:
    """``value`` as a short, printable quote: control characters as ``\\xNN`` escapes, cut to ``limit``
    characters with the full length said (``'abc…' (20,000 characters)``)."""
    text = str(value)
    shown = "".join(_printable(ch) for ch in text[:limit])
    if len(text) > limit:
        return f"'{shown}…' ({len(text):,} characters)"
    return f"'{shown}'"


def _printable(ch: str) -> str:
    if ch == " " or unicodedata.category(ch)[0] != "C":
        return ch
    return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"


def problem(key: str, value: Any) -> str | None:
    """Why ``value`` cannot be the value of ``key`` (one line), or None when it can."""
    if isinstance(value, list | tuple):
        shown = ", ".join(excerpt(v, 20) for v in list(value)[:3])
        more = " …" if len(value) > 3 else ""
        return f"{key} is given {len(value)} times ({shown}{more}); give it once"
    text = str(value)
    if len(text) > MAX_VALUE_CHARS:
        return f"{key} is too long to be a value here: {excerpt(text)}"
    bad = next((ch for ch in text if unicodedata.category(ch) in ("Cc", "Cs", "Cn")), None)
    if bad is not None:
        what = "a NUL byte" if bad == "\x00" else f"a control character (\\x{ord(bad):02x})"
        return f"{key} holds {what}: {excerpt(text)}"
    return None


@dataclass(frozen=True)
class Checked:
    """The usable values of a page's keys, and a line per value that was dropped."""

    values: dict[str, str]
    problems: tuple[str, ...]


def check(query: Mapping[str, Any], keys: Iterable[str]) -> Checked:
    """The values of ``keys`` in ``query`` that a page can use; other keys of the query are ignored (they
    change nothing, so they are not worth a message)."""
    values: dict[str, str] = {}
    problems: list[str] = []
    for key in keys:
        if key not in query:
            continue
        why = problem(key, query[key])
        if why is None:
            values[key] = str(query[key])
        else:
            problems.append(why)
    return Checked(values, tuple(problems))


def usable(value: Any) -> bool:
    """Whether a value from a control or a crafted request may reach a query (same rules as the address)."""
    return value is None or problem("value", value) is None
