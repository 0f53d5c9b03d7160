"""The dashboard's figure and table builders, one module per page, pure: plain functions of the small frames
the queries return (:mod:`demuxlab.dashboard.data`), which they never import, to Plotly JSON
(:mod:`demuxlab.dashboard.plot`) or frames. Tests call them directly; page callbacks stay thin.

- ``base``: what every builder shares (blank figures, series names and grouping, integer ticks, legends).
- ``summary``: means, confidence intervals and tests over repeats (:mod:`demuxlab.stats`' one routine),
  the model prediction to show per point.
- ``sweep``, ``operations``, ``run``, ``model``, ``compare``, ``experiments``, ``ranking``, ``history``:
  each page's builders.
"""
