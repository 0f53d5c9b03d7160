"""What the binaries accept, read from their own constants (``images/common/demux_limits.h``).

The C sources compile that header in; spec checks read it here, so the spec's bounds and the binaries'
are one set of numbers. Besides, bounds of our own that keep every command fast on any input: the size
of a spec file, its nesting depth and node count (after alias expansion), and the runs of one sweep.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from demuxlab.errors import ConfigError
from demuxlab.paths import repo_root

HEADER = "images/common/demux_limits.h"
_DEFINE = re.compile(r"^#define\s+DEMUX_([A-Z0-9_]+)\s+(\d+)\b", re.MULTILINE)

# Our own bounds (not the binaries'): a spec is a page of YAML, a sweep at most this many runs.
MAX_SPEC_BYTES = 256 * 1024
MAX_YAML_DEPTH = 32
MAX_YAML_NODES = 5_000  # counted with every alias expanded (smoke.yaml: about 100)
MAX_ARRAY_ITEMS = 1_000
MAX_RUNS = 100_000
MAX_SEED = 2**63 - 1


@dataclass(frozen=True)
class Limits:
    max_threads: int
    max_work_us: int
    max_msg_size: int
    max_slots: int
    max_cpus: int
    client_max_threads: int
    client_max_conns: int
    client_max_msg: int
    max_phase_s: int
    max_rate: int
    decimals: int

    @property
    def msg_size(self) -> int:
        """Largest message both sides take."""
        return min(self.max_msg_size, self.client_max_msg)

    @property
    def connections(self) -> int:
        """Most connections both sides take."""
        return min(self.max_slots, self.client_max_conns)


def parse_header(text: str, source: str = HEADER) -> Limits:
    found = {name.lower(): int(value) for name, value in _DEFINE.findall(text)}
    fields = Limits.__dataclass_fields__
    missing = sorted(set(fields) - set(found))
    if missing:
        raise ConfigError(f"{source}: no DEMUX_{missing[0].upper()} defined")
    return Limits(**{name: found[name] for name in fields})


@functools.cache
def limits() -> Limits:
    """The binaries' limits from ``images/common/demux_limits.h`` of this checkout."""
    path = repo_root() / HEADER
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the binaries' limits: {exc.strerror}") from None
    return parse_header(text, str(path))
