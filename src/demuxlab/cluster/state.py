"""Per-pair health and progress: one small JSON file per pair, ``<state>/pairs/<pair>.json``.

Only the holder of a pair's lease writes its file (atomically), so no other lock is needed; anyone may read
it (the dashboard, ``demuxlab cluster progress``). A pair that failed ``quarantine_after`` runs in a row is
*quarantined*: the scheduler gives it no more runs, in this sweep or the next, until
``demuxlab cluster unquarantine PAIR`` (after the fault is fixed).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from demuxlab.jsonio import write_json_atomic
from demuxlab.vocab import RUN_FAILED, RUN_OK


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class PairState:
    name: str
    hardware_class: str | None = None
    consecutive_failures: int = 0
    quarantined: bool = False
    quarantine_reason: str | None = None
    quarantined_at: str | None = None
    done: int = 0  # attempts that ended ok on this pair
    failed: int = 0  # attempts that failed on this pair (retried elsewhere, or recorded as failed)
    running: str | None = None  # run id in progress (None when idle)
    last_run: str | None = None
    last_status: str | None = None
    updated_at: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def pairs_dir(state: Path) -> Path:
    return state / "pairs"


def state_path(state: Path, pair: str) -> Path:
    return pairs_dir(state) / f"{pair}.json"


def read_state(state: Path, pair: str) -> PairState:
    """The pair's state; a missing or unreadable file is a fresh, healthy pair."""
    try:
        doc = json.loads(state_path(state, pair).read_text())
    except (OSError, json.JSONDecodeError):
        return PairState(name=pair)
    known = {k: v for k, v in doc.items() if k in PairState.__dataclass_fields__}
    known["name"] = pair
    return PairState(**known)


def write_state(state: Path, st: PairState) -> None:
    """Atomic replace; call only while holding the pair's lease."""
    st.updated_at = _now()
    write_json_atomic(state_path(state, st.name), st.to_json())


def record_outcome(st: PairState, run_id: str, ok: bool, reason: str | None, quarantine_after: int) -> bool:
    """Count one finished attempt on the pair; returns True when this attempt quarantined it."""
    st.running = None
    st.last_run = run_id
    st.last_status = RUN_OK if ok else RUN_FAILED
    if ok:
        st.done += 1
        st.consecutive_failures = 0
        return False
    st.failed += 1
    st.consecutive_failures += 1
    if not st.quarantined and quarantine_after > 0 and st.consecutive_failures >= quarantine_after:
        st.quarantined = True
        st.quarantined_at = _now()
        st.quarantine_reason = (
            f"{st.consecutive_failures} runs in a row failed; last: {reason or 'no reason given'}"
        )[:500]
        return True
    return False


def all_states(state: Path, names: list[str]) -> list[PairState]:
    return [read_state(state, name) for name in names]
