"""Run records as files: read bounded (a regular file, at most ``MAX_RECORD_BYTES``), and the spec text
a record points at."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from demuxlab import paths
from demuxlab.errors import DemuxlabError
from demuxlab.ingest.record import Prepared, embedded_spec_text, parse_record, prepare_record
from demuxlab.ingest.schema import MAX_RECORD_BYTES


def read_record_bytes(path: Path) -> bytes:
    """A regular file (no FIFO or device), at most MAX_RECORD_BYTES."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise DemuxlabError(f"{path}: cannot read run record: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise DemuxlabError(f"{path}: cannot read run record: not a regular file")
        with os.fdopen(os.dup(fd), "rb") as f:
            raw = f.read(MAX_RECORD_BYTES + 1)
    except OSError as exc:
        raise DemuxlabError(f"{path}: cannot read run record: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(raw) > MAX_RECORD_BYTES:
        raise DemuxlabError(f"{path}: more than {MAX_RECORD_BYTES} bytes, more than a run record holds")
    return raw


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
