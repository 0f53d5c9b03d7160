"""The frame: header with the pages, the page container, the database banner, download plumbing."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import dash
from dash import dcc, html

from demuxlab.dashboard import common
from demuxlab.dashboard.data import DataUnavailable

# (module, title) in the order of the header; each module calls dash.register_page itself.
PAGES: tuple[tuple[str, str], ...] = (
    ("experiments", "Experiments"),
    ("sweep", "Sweep"),
    ("ranking", "Ranking"),
    ("history", "History"),
    ("operations", "Operations"),
    ("run", "Run"),
    ("model", "Model"),
    ("compare", "Compare"),
    ("hosts", "Hosts"),
    ("claims", "Claims"),
    ("not_found_404", ""),
)
_APP: dash.Dash | None = None


def create_app(url: str | None = None, *, refresh_ms: int | None = None) -> dash.Dash:
    """The Dash app reading ``url`` (default: the read-only URL, :func:`demuxlab.db.engine.readonly_url`).

    Dash keeps pages and callbacks in process-wide registries, so there is one app per process: a second
    call re-points that app at ``url`` and returns it.
    """
    global _APP
    common.configure(url, refresh_ms)
    if _APP is not None:
        return _APP
    here = Path(__file__).parent
    app = dash.Dash(
        __name__,
        use_pages=True,
        pages_folder="",
        assets_folder=str(here / "assets"),
        title="demuxlab",
        update_title=None,  # type: ignore[arg-type]
        suppress_callback_exceptions=True,
        serve_locally=True,
    )
    for module, _ in PAGES:
        mod = importlib.import_module(f"demuxlab.dashboard.pages.{module}")
        # register_page runs at the top of the module, before its layout exists: hand it over here.
        dash.page_registry[mod.__name__]["layout"] = mod.layout
    app.layout = frame
    common.register_frame_callbacks()

    @app.server.route("/healthz")
    def healthz() -> Any:
        try:
            common.store().ping()
        except DataUnavailable as exc:
            return {"ok": False, "error": exc.message}, 503
        return {"ok": True}

    _APP = app
    return app


def frame() -> html.Div:
    links = [
        dcc.Link(
            title,
            href=dash.page_registry[f"demuxlab.dashboard.pages.{module}"]["path"],
            id=f"frame-nav-{module}",
        )
        for module, title in PAGES
        if title
    ]
    return html.Div(
        [
            html.Header(
                [
                    html.Span("demuxlab", className="dlx-brand"),
                    *links,
                    html.Span(
                        f"read-only · {common.store().masked_url()}", className="dlx-db", id="frame-db"
                    ),
                ],
                className="dlx-header",
            ),
            html.Main(dash.page_container, className="dlx-main"),
            dcc.Store(id="frame-dl-sink"),
            dcc.Store(id="frame-retry-sink"),
            dcc.Interval(id="frame-retry", interval=3000),
        ]
    )
