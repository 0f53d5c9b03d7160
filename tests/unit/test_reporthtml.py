"""The report's pages (issue 45: a report that opens on the results): tables with the key columns first, a
column of one value said once above them, numbers in 4 significant digits; claims.md's Markdown as HTML; a
lead written from what the experiment holds."""

from __future__ import annotations

from demuxlab import reporthtml
from demuxlab.reporthtml import describe_points as describe


def test_a_table_keeps_its_key_columns_first_and_says_constant_ones_once() -> None:
    rows = [
        {"pattern": "lf", "threads": 1, "mean": 67912.345, "p": 0.002055370354682793, "work_us": 5.0},
        {"pattern": "tpc", "threads": 2, "mean": 2664.4480000000003, "p": None, "work_us": 5.0},
    ]
    html = reporthtml.table(rows, ["pattern", "threads", "mean", "p", "work_us"])
    assert html.index("<th>pattern</th>") < html.index("<th>threads</th>") < html.index("<th>mean</th>")
    assert "<th>work us</th>" not in html and "Every row: work us: 5." in html
    assert ">67,910<" in html and ">2664<" in html and ">0.002055<" in html
    assert "0.002055370354682793" not in html and "2664.448" not in html


def test_claims_markdown_reads_as_html() -> None:
    md = (
        "## Recommendation\n\nThe *best* design, **holds** here.\n\n"
        "| claim | verdict |\n|---|---|\n| [S0.x](#s0x) | **refuted** |\n\n"
        "- a\n  - `b`\n- c\n\n> quoted\n"
    )
    html = reporthtml.markdown(md)
    assert '<h2 id="recommendation">Recommendation</h2>' in html
    assert "<i>best</i>" in html and '<b class="holds">holds</b>' in html
    assert '<td><a href="#s0x">S0.x</a></td><td><b class="refuted">refuted</b></td>' in html
    assert html.count("<ul>") == 2 and "<code>b</code>" in html and "<blockquote>quoted</blockquote>" in html
    page = reporthtml.page("smoke: claims", [html], "lead")
    assert page.startswith("<!DOCTYPE html>") and "<title>smoke: claims</title>" in page


def test_the_lead_says_what_the_experiment_holds() -> None:
    def row(pattern: str, notifier: str, threads: int, over: bool) -> dict[str, object]:
        return {
            "pattern": pattern, "notifier": notifier, "threads": threads, "instrument": False, "runs_ok": 2,
            "runs_failed": 0, "oversubscribed": over, "server_cpus": 1,
        }  # fmt: skip

    rows = [row("reactor", "poll", 1, False), row("tpc", "none", 2, True), row("lf", "select", 1, False)]
    text = describe([*rows, {**row("lf", "select", 1, False), "instrument": True, "runs_ok": 1}])
    assert text.startswith(
        "3 measured points of 3 designs (lf/select, reactor/poll, tpc/none) at 1, 2 server"
    )
    assert (
        "6 runs ok, 0 failed" in text
        and "1 point(s) had more server threads than the server's 1 CPU(s)" in text
    )
    assert "1 calibration points" in text
    shared = describe(rows, ["tb1-server", "tb1-client"])
    assert shared.startswith("These runs ran on hosts that share one machine's CPUs (tb1-server, tb1-client")


def test_headers_break_between_words_and_a_wide_table_scrolls() -> None:
    """Issue 45, read in the report's screenshot: "threa ds", "notifi er", "oversubscri bed" were headers
    broken inside their words (every cell could break anywhere); numbers never break; a table wider than
    the report's pane scrolls on its own instead of squeezing its columns."""
    rules = {
        sel.strip(): body
        for sel, body in (r.split("{", 1) for r in reporthtml.STYLE.replace("\n", " ").split("}") if "{" in r)
    }
    assert "anywhere" not in rules["th"] and "overflow-wrap: normal" in rules["th"]
    assert "anywhere" not in rules["th, td"] and "nowrap" in rules["td.num"]
    html = reporthtml.table([{"pattern": "lf", "threads": 1}, {"pattern": "tpc", "threads": 2}], ["pattern"])
    assert html.startswith('<div class="wide"><table>') and "overflow-x: auto" in rules[".wide"]


def test_a_figure_of_no_paper_is_titled_by_its_experiment_alone() -> None:
    from demuxlab.marks import figure_title

    assert figure_title("smoke", "none") == "smoke"
    assert figure_title("msept12", "seed 000, Fig. 6") == "msept12 (seed 000, Fig. 6)"
