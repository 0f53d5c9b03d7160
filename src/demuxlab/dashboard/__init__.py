"""The demuxlab dashboard: Plotly Dash pages over the read-only database role.

``create_app()`` builds the app (``app.py`` is the frame, ``pages/`` one module per page with its layout
and callbacks, ``figures.py`` the figure builders, ``data.py`` the queries); ``serve()`` runs it under
waitress. The top-level ``dashboard/`` folder of the repository is the thin entry point.
"""

from __future__ import annotations

from demuxlab.dashboard.app import create_app
from demuxlab.dashboard.server import serve

__all__ = ["create_app", "serve"]
