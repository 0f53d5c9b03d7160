"""``python -m bench``: list the benchmarks, or run one by name (:mod:`bench.harness`)."""

from __future__ import annotations

import sys

from bench.harness import main

sys.exit(main())
