"""What every page shares: the read-only store, error and empty panels, figure and table blocks with their
downloads, and keeping a page's view state in the URL."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
from dash import ALL, Input, Output, clientside_callback, dash_table, dcc, html

from demuxlab import marks
from demuxlab.dashboard import address, style
from demuxlab.dashboard.data import DataUnavailable, NotFound, Store
from demuxlab.dashboard.fold import FOLDS

LOG = logging.getLogger("demuxlab.dashboard")

STORE = Store()
# How often the Experiments page and the database banner look again (ms); tests shorten it.
REFRESH_MS = 5000


def configure(url: str | None = None, refresh_ms: int | None = None) -> None:
    """Point the dashboard at ``url`` (default: :func:`demuxlab.db.engine.readonly_url`)."""
    global STORE, REFRESH_MS
    STORE.dispose()
    STORE = Store(url)
    if refresh_ms is not None:
        REFRESH_MS = refresh_ms


def store() -> Store:
    return STORE


# -- panels ---------------------------------------------------------------------------------------------


def message(text: Any, kind: str = "info", *, id: str | None = None) -> html.Div:
    """A notice: ``info`` (nothing to show yet), ``warning`` (not found), ``error`` (database)."""
    props: dict[str, Any] = {"className": f"dlx-msg dlx-msg-{kind}", "role": "status"}
    if id is not None:
        props["id"] = id
    return html.Div(text, **props)


def unavailable_panel(exc: DataUnavailable) -> html.Div:
    """The page shown instead of a traceback when the database cannot answer; it reloads by itself once
    the database answers again (the frame polls ``/healthz``)."""
    title = "No demuxlab schema in the database" if exc.kind == "no-schema" else "Database unavailable"
    return html.Div(
        [
            html.H3(title),
            html.P(exc.message, className="dlx-mono"),
            html.P(
                "This page tries again every few seconds and reloads itself when the database answers.",
                className="dlx-muted",
            ),
            html.Div(id="frame-db-down", **{"data-down": "1"}),  # type: ignore[arg-type]
        ],
        className="dlx-msg dlx-msg-error",
        role="alert",
    )


def not_found_panel(exc: NotFound, what: str, hint: Any = None) -> html.Div:
    return html.Div(
        [html.H3(f"Unknown {what}"), html.P(str(exc)), *([hint] if hint is not None else [])],
        className="dlx-msg dlx-msg-warning",
        role="alert",
    )


def guard(what: str, body: Any, *, hint: Any = None) -> Any:
    """Call ``body()`` and turn the dashboard's expected failures into panels; anything else is logged
    with its traceback and shown as one line, never a blank page and an HTTP 500."""
    try:
        return body()
    except DataUnavailable as exc:
        return unavailable_panel(exc)
    except NotFound as exc:
        return not_found_panel(exc, what, hint)
    except Exception as exc:
        LOG.exception("dashboard: %s failed", what)
        return failure_panel(exc)


def failure_panel(exc: BaseException) -> html.Div:
    return html.Div(
        [
            html.H3("This view failed"),
            html.P(f"{type(exc).__name__}: {address.excerpt(exc, 300)}", className="dlx-mono"),
            html.P("The dashboard's log has the details.", className="dlx-muted"),
        ],
        className="dlx-msg dlx-msg-error",
        role="alert",
        id="frame-page-error",
    )


def address_panel(problems: Sequence[str]) -> html.Div:
    """What the address asked for that this page cannot use (each value dropped: the page shows its
    default instead)."""
    return html.Div(
        [
            html.H3("Part of this address was not used"),
            html.Ul([html.Li(p) for p in problems]),
            html.P("The page shows its default for each of these instead.", className="dlx-muted"),
        ],
        className="dlx-msg dlx-msg-warning",
        role="alert",
        id="frame-address",
    )


def page_layout(
    *keys: str, what: str = "experiment", hint: Any = "all experiments"
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Wrap a page's ``layout(**query)``: only ``keys`` reach it, each checked first
    (:func:`demuxlab.dashboard.address.check`): a NUL, a control character, an overlong or a repeated
    value is dropped and named in a panel above the page, never handed to a query. A name the database
    does not have shows "Unknown <what>" with a link back (``hint``: its text, or a component)."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        back = html.P(dcc.Link(hint, href="/")) if isinstance(hint, str) else hint

        @functools.wraps(fn)
        def layout(**query: Any) -> Any:
            checked = address.check(query, keys)
            body = guard(what, lambda: fn(**checked.values), hint=back)
            if not checked.problems:
                return body
            return [address_panel(checked.problems), *(body if isinstance(body, list) else [body])]

        return layout

    return wrap


def shared_machine_panel(hosts: Sequence[str], validation: bool = False) -> html.Div | None:
    """The warning over a page whose runs ran on hosts sharing one machine's CPUs (the test cluster): not
    performance data, and (``validation``) a model comparison that is not a validation. None: no such run."""
    if not hosts:
        return None
    text = (
        f"These runs ran on hosts that share one machine's CPUs ({', '.join(hosts)}: the test cluster): they "
        "are not performance data. They show that the pipeline works, not how the designs perform"
    )
    text += "; the model comparison below is not a validation of the models." if validation else "."
    return message(text, "warning", id="frame-shared-machine")


def empty_database_panel() -> html.Div:
    return message(
        [
            html.H3("No experiments in the database yet"),
            html.P(
                [
                    "Run one with ",
                    html.Code("make quickstart"),
                    " (or ",
                    html.Code("snakemake --profile local all"),
                    " in workflows/); runs appear here as they are ingested.",
                ]
            ),
        ],
        "info",
        id="frame-empty-db",
    )


# -- figures and tables ---------------------------------------------------------------------------------

GRAPH_CONFIG: dict[str, Any] = {
    "displaylogo": False,
    "responsive": True,
    "toImageButtonOptions": {"format": "png", "scale": 2},
}


def figure_block(
    graph_id: str,
    figure: Any = None,
    *,
    pdf: bool = False,
    height: int | None = None,
    loading: bool = True,
) -> html.Div:
    """A graph with its download buttons: PNG and SVG (drawn by Plotly in the browser), and PDF (drawn
    on the server, for the sweep) when ``pdf``."""
    buttons: list[Any] = [
        html.Button(
            fmt.upper(),
            id={"type": "frame-dl", "graph": graph_id, "fmt": fmt},
            className="dlx-btn dlx-btn-small",
            title=f"Download this figure as {fmt.upper()}",
        )
        for fmt in ("png", "svg")
    ]
    if pdf:
        buttons.append(
            html.Button(
                "PDF",
                id=f"{graph_id}-pdf",
                className="dlx-btn dlx-btn-small",
                title="Download as PDF (vector)",
            )
        )
        buttons.append(dcc.Download(id=f"{graph_id}-pdf-download"))
    style_: dict[str, Any] = {"height": f"{height}px"} if height else {}
    graph = dcc.Graph(
        id=graph_id,
        figure=figure if figure is not None else {"data": [], "layout": {}},
        config=GRAPH_CONFIG,  # type: ignore[arg-type]
        style=style_,
    )
    return html.Div(
        [
            html.Div([html.Span("download", className="dlx-muted"), *buttons], className="dlx-dl-bar"),
            dcc.Loading(graph, type="dot", delay_show=300) if loading else graph,
        ],
        className="dlx-figure",
    )


def table_block(
    table_id: str,
    frame: pd.DataFrame | None = None,
    *,
    page_size: int = 15,
    markdown: Sequence[str] = (),
) -> Any:
    """A sortable, filterable table with CSV export (every column, shown or not) that fits the page
    (1,400 px): words stay whole, headers break between them, a long id or document breaks where it meets
    300 px (dashboard.css); numbers in 4 significant digits (:func:`table_props`); a table folded by
    :func:`demuxlab.dashboard.fold.fold_columns` shows its key columns and names the rest above it, beside
    an "all columns" button."""
    frame = frame if frame is not None else pd.DataFrame()
    table = dash_table.DataTable(  # type: ignore[attr-defined]
        id=table_id,
        **table_props(frame, markdown=markdown),
        page_size=page_size,
        sort_action="native",
        filter_action="native",
        export_format="csv",
        export_headers="ids",
        export_columns="all",
        style_table={"overflowX": "auto", "maxWidth": "100%"},
        style_cell={
            "fontFamily": style.FONT,
            "fontSize": 12,
            "padding": "3px 6px",
            "textAlign": "left",
            "whiteSpace": "normal",
            "height": "auto",
            "minWidth": "44px",
        },
        style_header={
            "fontWeight": 600,
            "backgroundColor": "#f1f3f5",
            "whiteSpace": "normal",
            "height": "auto",
        },
        markdown_options={"link_target": "_self"},
    )
    if table_id not in FOLDS:
        return table
    switch = html.Button(
        "all columns",
        id=f"{table_id}-all",
        n_clicks=0,
        className="dlx-btn dlx-btn-small dlx-fold-switch",
        title="Show every column (the table then scrolls sideways), or the key columns only",
    )
    note = html.Span(id=f"{table_id}-fold-note", className="dlx-muted")
    box = html.Div(table, id=f"{table_id}-fold-box", className="dlx-fold-box")
    return html.Div([html.Div([switch, note], className="dlx-fold"), box])


def table_props(frame: pd.DataFrame, *, markdown: Sequence[str] = ()) -> dict[str, Any]:
    """``data`` and ``columns`` for a DataTable from a frame: timestamps and documents as text, numbers in
    4 significant digits (0.002055, 2664; never 0.002055370354682793), headers with spaces where the column
    has underscores (so they wrap) and its unit in parentheses (:func:`header`; the CSV export keeps the
    ids)."""
    out = frame.copy()
    for col in out.columns:
        if pd.api.types.is_datetime64_any_dtype(out[col]):
            out[col] = out[col].dt.strftime("%Y-%m-%d %H:%M:%S")
        elif pd.api.types.is_float_dtype(out[col]):
            out[col] = [marks.sig(v) for v in out[col]]
        elif out[col].dtype == object:
            out[col] = out[col].map(_cell)
    columns = [
        {"name": header(str(c)), "id": c, **({"presentation": "markdown"} if c in markdown else {})}
        for c in out.columns
    ]
    return {"data": out.to_dict("records"), "columns": columns}


# A column id's unit, by how it ends, as a header writes it ("mean_msgs_per_s": "mean (msg/s)").
_UNIT_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("_msgs_per_s", "msg/s"),
    ("_pct", "%"),
    ("_us", "µs"),
    ("_ms", "ms"),
)
_HEADERS: dict[str, str] = {"msg_size": "msg size (B)", "rate": "rate (msg/s)"}


def header(column: str) -> str:
    """A column's header: its id with spaces for underscores, the unit its name ends in written after it in
    parentheses (``work_us``: ``work (µs)``, ``paper_error_pct``: ``paper error (%)``)."""
    if column in _HEADERS:
        return _HEADERS[column]
    for suffix, unit in _UNIT_SUFFIXES:
        if column.endswith(suffix) and len(column) > len(suffix):
            return f"{column[: -len(suffix)].replace('_', ' ')} ({unit})"
    return column.replace("_", " ")


def sig_frame(frame: pd.DataFrame, digits: int = 4) -> pd.DataFrame:
    """``frame`` with its float columns in ``digits`` significant digits."""
    out = frame.copy()
    for col in out.columns:
        if pd.api.types.is_float_dtype(out[col]):
            out[col] = [marks.sig(v, digits) for v in out[col]]
    return out


def _cell(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, dict | list):
        return json.dumps(v, sort_keys=True)
    if hasattr(v, "isoformat"):
        return v.strftime("%Y-%m-%d %H:%M:%S") if hasattr(v, "strftime") else v.isoformat()
    if isinstance(v, float):
        return marks.sig(v)
    return v if isinstance(v, int | float | bool | str) else str(v)


def control(label: str, child: Any, wide: bool = False) -> html.Div:
    """A labelled control of a page's control bar (``wide`` for experiment names and other long values)."""
    return html.Div([html.Label(label), child], className="dlx-control" + (" dlx-wide" if wide else ""))


def facts_list(items: Sequence[tuple[str, Any]]) -> html.Dl:
    children: list[Any] = []
    for k, v in items:
        children.append(html.Dt(k))
        children.append(html.Dd("—" if v is None or v == "" else str(v)))
    return html.Dl(children, className="dlx-facts")


def link_run(run_id: str) -> str:
    return f"[{run_id[:8]}](/run?run={run_id})"


# -- URL state ------------------------------------------------------------------------------------------


def url_sync(page: str, controls: Sequence[tuple[str, str, str]]) -> None:
    """Keep the page's view in the URL: whenever one of ``controls`` ((component id, property, query
    key)) changes, the query string is rewritten in place (``history.replaceState``: no navigation, no
    re-render), so that copying the address reproduces the view; the page's ``layout(**query)`` reads it
    back."""
    keys = json.dumps([key for _, _, key in controls])
    clientside_callback(
        f"""
        function() {{
            const keys = {keys};
            const params = new URLSearchParams();
            for (let i = 0; i < keys.length; i++) {{
                let v = arguments[i];
                if (v === null || v === undefined || v === '') continue;
                if (typeof v === 'number' && !Number.isFinite(v)) continue;
                if (Array.isArray(v) && v.length === 0) continue;
                if (Array.isArray(v)) v = v.join(',');
                if (v === true) v = '1';
                if (v === false) v = '0';
                params.set(keys[i], v);
            }}
            const q = params.toString();
            const url = window.location.pathname + (q ? '?' + q : '');
            if (url !== window.location.pathname + window.location.search) {{
                window.history.replaceState(window.history.state, '', url);
            }}
            return q;
        }}
        """,
        Output(f"{page}-url-state", "data"),
        [Input(cid, prop) for cid, prop, _ in controls],
    )


def url_state_store(page: str) -> dcc.Store:
    return dcc.Store(id=f"{page}-url-state")


def split_list(value: Any) -> list[str]:
    """A query value ``a,b`` (or a list) as a list."""
    if value is None or value == "":
        return []
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    return [v.strip() for v in str(value).split(",") if v.strip()]


def register_frame_callbacks() -> None:
    """Downloads of figures (Plotly in the browser: PNG, SVG) and reloading once the database is back."""
    clientside_callback(
        """
        function(clicks) {
            const ctx = window.dash_clientside.callback_context;
            const t = ctx.triggered_id;
            if (!t || !ctx.triggered.length || !ctx.triggered[0].value) {
                return window.dash_clientside.no_update;
            }
            const el = document.getElementById(t.graph);
            const gd = el && (el.classList.contains('js-plotly-plot')
                ? el : el.querySelector('.js-plotly-plot'));
            if (!gd || !window.Plotly) { return window.dash_clientside.no_update; }
            const stamp = new Date().toISOString().slice(0, 19).replace(/[:T]/g, '-');
            window.Plotly.downloadImage(gd, {
                format: t.fmt, filename: 'demuxlab-' + t.graph + '-' + stamp,
                width: gd._fullLayout.width, height: gd._fullLayout.height, scale: t.fmt === 'png' ? 2 : 1
            });
            return t.graph + '.' + t.fmt;
        }
        """,
        Output("frame-dl-sink", "data"),
        Input({"type": "frame-dl", "graph": ALL, "fmt": ALL}, "n_clicks"),
        prevent_initial_call=True,
    )
    clientside_callback(
        """
        function(n) {
            if (!document.getElementById('frame-db-down')) { return window.dash_clientside.no_update; }
            fetch('/healthz', {cache: 'no-store'}).then(function(r) {
                if (r.ok) { window.location.reload(); }
            }).catch(function() {});
            return n;
        }
        """,
        Output("frame-retry-sink", "data"),
        Input("frame-retry", "n_intervals"),
        prevent_initial_call=True,
    )
