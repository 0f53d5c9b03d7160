"""Folding a table wider than the page (issue 45): its key columns shown, the rest named above it beside an
"all columns" button (:func:`fold_columns`, used by :func:`demuxlab.dashboard.common.table_block`)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

from dash import Input, Output, clientside_callback


@dataclasses.dataclass(frozen=True)
class Fold:
    """How a table wider than the page folds (:func:`fold_columns`): ``keys`` always shown; ``params``
    shown where they differ between the rows, else named with their one value above the table; every other
    column named there, and shown by the table's "all columns" button (or Dash's Toggle Columns)."""

    keys: tuple[str, ...]
    params: tuple[str, ...] = ()


FOLDS: dict[str, Fold] = {}

_FOLD_JS = """
function(columns, rows, clicks) {
    const fold = __FOLD__;
    columns = columns || []; rows = rows || [];
    const name = (c) => Array.isArray(c.name) ? c.name[c.name.length - 1] : String(c.name);
    const text = (v) => (v === null || v === undefined) ? '' : String(v);
    // a long value in the line: each word past 20 characters (an id, a hash) to its first 12, the whole to 90
    const word = (w) => w.length > 20 ? w.slice(0, 12) + '…' : w;
    const cut = (t) => {
        const c = t.split(' ').map(word).join(' ');
        return c.length > 90 ? c.slice(0, 88) + '…' : c;
    };
    if ((clicks || 0) % 2 === 1) {
        const says = columns.length ? `all ${columns.length} columns: scroll the table sideways →` : '';
        return [[], says, 'dlx-fold-box dlx-fold-wide', 'key columns only'];
    }
    const same = [], empty = [], other = [], hidden = [];
    for (const c of columns) {
        if (fold.keys.includes(c.id)) { continue; }
        if (fold.params.includes(c.id)) {
            const values = new Set(rows.map((r) => text(r[c.id])));
            if (values.size > 1) { continue; }
            const v = values.size ? [...values][0] : '';
            if (v === '') { empty.push(name(c)); } else { same.push(`${name(c)} = ${cut(v)}`); }
        } else {
            other.push(name(c));
        }
        hidden.push(c.id);
    }
    if (!hidden.length) { return [[], '', 'dlx-fold-box', 'all columns']; }
    const parts = [`${columns.length - hidden.length} of ${columns.length} columns shown`];
    if (same.length) { parts.push('the same on every row: ' + same.join(', ')); }
    if (empty.length) { parts.push('empty on every row: ' + empty.join(', ')); }
    if (other.length) { parts.push('not shown: ' + other.join(', ')); }
    return [hidden, parts.join('; '), 'dlx-fold-box', `all ${columns.length} columns`];
}
"""


def fold_columns(table_id: str, keys: Sequence[str], params: Sequence[str] = ()) -> None:
    """Fold the table ``table_id`` (of :func:`table_block`) to fit the page: its ``keys`` shown, its
    ``params`` where they vary between the rows, the rest hidden (``hidden_columns``) and named, with their
    value where it is one for every row, in a line above the table beside an "all columns" button (every
    column, in a table that scrolls sideways, a shadow on its right edge saying so; again: the key ones);
    the CSV export keeps every column. Called once, when the page's module is imported (it registers a
    callback)."""
    fold = Fold(tuple(keys), tuple(params))
    FOLDS[table_id] = fold
    clientside_callback(
        _FOLD_JS.replace("__FOLD__", json.dumps(dataclasses.asdict(fold))),
        Output(table_id, "hidden_columns"),
        Output(f"{table_id}-fold-note", "children"),
        Output(f"{table_id}-fold-box", "className"),
        Output(f"{table_id}-all", "children"),
        Input(table_id, "columns"),
        Input(table_id, "data"),
        Input(f"{table_id}-all", "n_clicks"),
    )
