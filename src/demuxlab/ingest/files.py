"""Run records as files: read bounded (a regular file, at most ``MAX_RECORD_BYTES``), and the spec text
a record points at."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from demuxlab import paths
from demuxlab.errors import DemuxlabError
from demuxlab.ingest.record import Prepared, embedded_spec_text, parse_record, prepare_record
from demuxlab.ingest.schema import MAX_RECORD_BYTES
from demuxlab.jsonio import FileRefused, read_capped


def read_record_bytes(path: Path) -> bytes:
    """A regular file (no FIFO or device), at most MAX_RECORD_BYTES."""
    try:
        return read_capped(path, MAX_RECORD_BYTES)
    except FileRefused as exc:
        if exc.too_big:
            raise DemuxlabError(
                f"{path}: more than {MAX_RECORD_BYTES} bytes, more than a run record holds"
            ) from None
        reason = exc.reason if exc.regular else "not a regular file"
        raise DemuxlabError(f"{path}: cannot read run record: {reason}") from None


def spec_text(experiment: Mapping[str, Any]) -> str | None:
    """The spec as it was run: the spec file if it still hashes to spec_sha256, else the embedded text."""
    spec_path = experiment.get("spec_path")
    if spec_path:
        path = Path(spec_path)
        if not path.is_absolute():
            path = paths.repo_root() / path
        try:
            data = path.read_bytes()
        except OSError:
            data = None
        if data is not None and hashlib.sha256(data).hexdigest() == experiment["spec_sha256"]:
            try:
                return data.decode("utf-8")
            except UnicodeDecodeError:
                pass
    return embedded_spec_text(experiment)


def load_record(path: str | Path) -> Prepared:
    """Read and validate one run record file."""
    path = Path(path)
    record = parse_record(read_record_bytes(path), str(path))
    return prepare_record(record, str(path), spec_text)
