"""Entry point of the demuxlab dashboard at the repository's top level.

The dashboard's code lives in the installed package, ``src/demuxlab/dashboard/`` (``app.py`` the frame,
``pages/`` one module per page, ``data/`` the queries, ``figures/`` the builders), so that it is part of
the one installable ``demuxlab`` package. This file only makes it runnable from here:

    .venv/bin/python dashboard/app.py [--host H] [--port P]   # = demuxlab dashboard
    .venv/bin/waitress-serve --port 8050 dashboard.app:server    # any WSGI server: ``server`` is the app
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from demuxlab.dashboard.app import create_app

app = create_app()
server = app.server

if __name__ == "__main__":
    from demuxlab.cli import main

    main(["dashboard", *sys.argv[1:]])
