"""The report's pages as self-contained HTML, so that ``snakemake --report`` shows each result inline (a
Snakemake report shows HTML and images in the page and offers any other file only as a download): a table
with its key columns first and numbers in 4 significant digits (:func:`demuxlab.marks.sig`), a figure
embedded as a data URI, and a small Markdown subset (``claims.md``: headings, paragraphs, lists, quotes,
tables, emphasis, code, links) as HTML.

Pure: rows and text in, HTML text out (no file, no plotting library).
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Mapping, Sequence
from typing import Any

from demuxlab import marks

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 12px; color: #212529; }
h1 { font-size: 20px; margin: 4px 0 8px; } h2 { font-size: 17px; margin: 18px 0 6px; }
p, li { font-size: 14px; line-height: 1.45; } .muted { color: #6c757d; font-size: 13px; }
table { border-collapse: collapse; font-size: 12px; margin: 6px 0 14px; max-width: 100%; }
th, td { border: 1px solid #dee2e6; padding: 3px 6px; text-align: left; vertical-align: top; }
td { overflow-wrap: anywhere; } th { background: #f1f3f5; overflow-wrap: normal; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.wide { overflow-x: auto; max-width: 100%; }
img { max-width: 100%; } blockquote { margin: 4px 0 4px 12px; color: #495057; }
code { font-size: 12px; background: #f1f3f5; padding: 0 3px; }
.holds { color: #009E73; font-weight: 600; } .refuted { color: #D55E00; font-weight: 600; }
"""


def page(title: str, body: Sequence[str], lead: str = "") -> str:
    """A whole HTML document: ``title``, an optional lead paragraph, then the body's blocks."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        *([f"<p>{html.escape(lead)}</p>"] if lead else []),
        *body,
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def cell(v: Any) -> tuple[str, bool]:
    """A value as a table cell's text (numbers in 4 significant digits) and whether it is a number."""
    if v is None or v == "" or (isinstance(v, float) and v != v):
        return "", False
    if isinstance(v, bool):
        return ("yes" if v else "no"), False
    if isinstance(v, int):
        return f"{v:,}" if abs(v) >= 10_000 else str(v), True
    if isinstance(v, float):
        s = marks.sig(v)
        if s is None:
            return "", False
        return (f"{s:,.0f}" if abs(s) >= 10_000 else f"{s:g}"), True
    return str(v), False


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], *, drop_constant: bool = True) -> str:
    """A table of ``rows`` in ``columns``' order (the key columns first); a column with one value in every
    row is said once above the table instead (``drop_constant``), so the rest fit the page. Headers break
    between words only and numbers never; a table still wider than the page scrolls on its own, the key
    columns in view."""
    cols = list(columns)
    same: list[str] = []
    if drop_constant and len(rows) > 1:
        for c in list(cols):
            values = {cell(r.get(c))[0] for r in rows}
            if len(values) == 1:
                cols.remove(c)
                text = values.pop()
                if text:
                    same.append(f"{c.replace('_', ' ')}: {text}")
    head = "".join(f"<th>{html.escape(c.replace('_', ' '))}</th>" for c in cols)
    body = []
    for r in rows:
        cells = []
        for c in cols:
            text, num = cell(r.get(c))
            cells.append(
                f'<td class="num">{html.escape(text)}</td>' if num else f"<td>{html.escape(text)}</td>"
            )
        body.append("<tr>" + "".join(cells) + "</tr>")
    note = f'<p class="muted">Every row: {html.escape("; ".join(same))}.</p>' if same else ""
    return (
        f'{note}<div class="wide"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
        "</div>"
    )


def image(png: bytes, alt: str) -> str:
    """A PNG embedded in the page (the report's pages must stand alone)."""
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def paragraph(text: str, muted: bool = False) -> str:
    return f"<p{' class=muted' if muted else ''}>{html.escape(text)}</p>"


# -- the points' page (points.html) --------------------------------------------------------------------

#: What the report's pages say of runs on hosts sharing one machine's CPUs.
SHARED_TEXT = (
    "These runs ran on hosts that share one machine's CPUs ({hosts}: the test cluster): they are not "
    "performance data; they show that the pipeline works, not how the designs perform."
)


#: points.html's columns, the key ones first (the design, its threads, the measurement), then the rest.
POINT_COLUMNS: tuple[str, ...] = (
    "pattern",
    "notifier",
    "threads",
    "runs_ok",
    "runs_failed",
    "throughput_mean",
    "throughput_ci_low",
    "throughput_ci_high",
    "server_cpus",
    "oversubscribed",
    "nonstationary_runs",
    "runs_flagged",
    "flags",
    "server_cpu_us_per_msg",
    "latency_p50_us",
    "latency_p99_us",
    "work_us",
    "connections",
    "msg_size",
    "client_threads",
    "rate",
    "hardware_class",
    "measured",
    "why",
)


def describe_points(rows: Sequence[dict[str, Any]], shared: Sequence[str] = ()) -> str:
    """What an experiment's points hold, in a few sentences (points.html's lead: the report's words come
    from the data, not from a fixed caption); ``shared``: :func:`demuxlab.report.shared_hosts`."""
    measured = [r for r in rows if not r.get("instrument") and r.get("runs_ok")]
    designs = sorted({f"{r['pattern']}/{r['notifier']}" for r in measured})
    threads = sorted({int(r["threads"]) for r in measured})
    ok = sum(int(r["runs_ok"]) for r in rows if not r.get("instrument"))
    failed = sum(int(r["runs_failed"]) for r in rows if not r.get("instrument"))
    over = [r for r in measured if r.get("oversubscribed")]
    text = (
        f"{len(measured)} measured points of {len(designs)} designs ({', '.join(designs) or 'none'}) at "
        f"{', '.join(map(str, threads)) or 'no'} server threads: {ok} runs ok, {failed} failed. Each point's "
        "mean over its repeats with its 95 % interval (Student t, from 2 runs; 1 run: no interval)."
    )
    if over:
        cpus = sorted({r["server_cpus"] for r in over if r.get("server_cpus")})
        text += (
            f" {len(over)} point(s) had more server threads than the server's {'/'.join(map(str, cpus))} "
            "CPU(s): oversubscribed, ringed in the figure, not comparable with the others."
        )
    if any((r.get("throughput_ci_low") or 0.0) < 0 for r in measured):
        text += " An interval reaching below zero is drawn from zero in the figure; the table gives it whole."
    calibration = [r for r in rows if r.get("instrument")]
    if calibration:
        text += f" {len(calibration)} calibration points (instrumented runs for the models) are listed apart."
    if shared:
        text = SHARED_TEXT.format(hosts=", ".join(shared)) + " " + text
    return text


# -- Markdown (the subset claims.md is written in) ----------------------------------------------------------

_INLINE = (
    (re.compile(r"`([^`]+)`"), r"<code>\1</code>"),
    (re.compile(r"\*\*([^*]+)\*\*"), r"<b>\1</b>"),
    (re.compile(r"(?<![*\w])\*([^*\s][^*]*)\*(?!\w)"), r"<i>\1</i>"),
    (re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)"), r'<a href="\2">\1</a>'),
)


def _inline(text: str) -> str:
    out = html.escape(text, quote=False)
    for pattern, repl in _INLINE:
        out = pattern.sub(repl, out)
    return out.replace("<b>holds</b>", '<b class="holds">holds</b>').replace(
        "<b>refuted</b>", '<b class="refuted">refuted</b>'
    )


def _row(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split(" | ")]


def markdown(text: str) -> str:
    """``text`` (headings, paragraphs, ``-`` lists nested by two spaces, ``>`` quotes, ``|`` tables,
    ``**bold**``, ``*italic*``, `` `code` ``, ``[text](link)``) as HTML blocks; headings get ids as
    GitHub makes them, so a table's ``#anchor`` links work."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            title = line[level:].strip()
            anchor = re.sub(r"[^a-z0-9 -]", "", title.lower()).replace(" ", "-")
            out.append(f'<h{level} id="{anchor}">{_inline(title)}</h{level}>')
            i += 1
        elif line.startswith("|"):
            i = _table(lines, i, out)
        elif line.lstrip().startswith("- "):
            i = _list(lines, i, out)
        elif line.startswith(">"):
            out.append(f"<blockquote>{_inline(line.lstrip('> '))}</blockquote>")
            i += 1
        else:
            para = []
            while (
                i < len(lines)
                and lines[i].strip()
                and lines[i][0] not in "#|>"
                and not lines[i].startswith("- ")
            ):
                para.append(lines[i].strip())
                i += 1
            out.append(f"<p>{_inline(' '.join(para))}</p>")
    return "\n".join(out)


def _table(lines: list[str], i: int, out: list[str]) -> int:
    head = _row(lines[i])
    i += 2  # the header and its |---| line
    body = []
    while i < len(lines) and lines[i].startswith("|"):
        body.append("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in _row(lines[i])) + "</tr>")
        i += 1
    th = "".join(f"<th>{_inline(c)}</th>" for c in head)
    out.append(
        f'<div class="wide"><table><thead><tr>{th}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'
    )
    return i


def _list(lines: list[str], i: int, out: list[str]) -> int:
    depth = 0
    while i < len(lines) and lines[i].lstrip().startswith("- "):
        indent = (len(lines[i]) - len(lines[i].lstrip())) // 2 + 1
        while depth < indent:
            out.append("<ul>")
            depth += 1
        while depth > indent:
            out.append("</ul>")
            depth -= 1
        out.append(f"<li>{_inline(lines[i].lstrip()[2:])}</li>")
        i += 1
    out.extend(["</ul>"] * depth)
    return i
