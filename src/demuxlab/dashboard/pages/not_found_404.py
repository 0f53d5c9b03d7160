"""Any other address."""

from __future__ import annotations

from typing import Any

import dash
from dash import dcc, html

dash.register_page(__name__, path="/404", name="Not found", title="demuxlab · not found")


def layout(**_: Any) -> Any:
    return html.Div(
        [html.H3("No such page"), html.P(["Start from ", dcc.Link("the experiments", href="/"), "."])],
        className="dlx-msg dlx-msg-warning",
    )
