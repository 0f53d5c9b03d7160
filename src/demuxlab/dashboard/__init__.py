"""The demuxlab dashboard: Plotly Dash pages over the read-only database role.

``create_app()`` builds the app; ``serve()`` runs it under waitress. The layers, each importing only those
below it:

- ``app.py`` (the frame), ``pages/`` (one module per page: layout, callbacks; thin);
- ``common.py`` (panels, figure and table blocks, the address kept in the URL);
- ``data/`` (the queries: I/O, through the read-only role) and ``figures/`` (pure builders of figures and
  tables from the frames the queries return; never importing ``data``);
- ``fields.py`` (the point's fields, from :mod:`demuxlab.point`), ``style.py`` (a colour per pattern, a dash
  and marker per notifier, from :mod:`demuxlab.vocab`), ``address.py`` (query values checked), ``plot.py``.

The top-level ``dashboard/`` folder of the repository is the thin entry point.
"""

from __future__ import annotations

from typing import Any

__all__ = ["create_app", "serve"]


def __getattr__(name: str) -> Any:
    # Lazy: importing a light module of the package (the command line reads ``server``'s defaults) must
    # not import Dash, pandas and SQLAlchemy.
    if name == "create_app":
        from demuxlab.dashboard.app import create_app

        return create_app
    if name == "serve":
        from demuxlab.dashboard.server import serve

        return serve
    raise AttributeError(name)
