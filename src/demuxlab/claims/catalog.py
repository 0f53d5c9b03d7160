"""Every seed claim, in the order the reports list them: seed 000's, then 001's, 002's, 003's and 004's.

Each seed's module holds its claims' texts and scopes beside their tests; adding a claim is one
:class:`~demuxlab.claims.context.Claim` entry in its seed's ``CLAIMS``.
"""

from __future__ import annotations

from demuxlab.claims import seed000, seed001, seed002, seed003, seed004
from demuxlab.claims.context import Claim

CLAIMS: tuple[Claim, ...] = (
    *seed000.CLAIMS,
    *seed001.CLAIMS,
    *seed002.CLAIMS,
    *seed003.CLAIMS,
    *seed004.CLAIMS,
)
