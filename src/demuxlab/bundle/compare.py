"""Compare a regenerated table or figure with the bundled one (pure: bytes or arrays in, a verdict out)."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Verdict:
    ok: bool
    detail: str


def compare_table(bundled: bytes, regenerated: bytes) -> Verdict:
    """Tables must be equal; the first differing cell is named."""
    if bundled == regenerated:
        return Verdict(True, "equal")
    a = list(csv.reader(io.StringIO(bundled.decode(errors="replace"))))
    b = list(csv.reader(io.StringIO(regenerated.decode(errors="replace"))))
    header = a[0] if a else []
    if len(a) != len(b):
        return Verdict(False, f"{len(b) - 1} rows regenerated, {len(a) - 1} bundled")
    for i, (ra, rb) in enumerate(zip(a, b, strict=True)):
        if ra != rb:
            for j in range(max(len(ra), len(rb))):
                va = ra[j] if j < len(ra) else "<none>"
                vb = rb[j] if j < len(rb) else "<none>"
                if va != vb:
                    col = header[j] if j < len(header) else f"#{j}"
                    return Verdict(False, f"row {i}, column {col}: bundled {va!r}, regenerated {vb!r}")
    return Verdict(False, "differs in line endings or quoting only")


def compare_pixels(bundled: Any, regenerated: Any, max_rms: float) -> Verdict:
    """Images (H×W×C arrays, 0–1 or 0–255) equal pixel by pixel, or within ``max_rms`` (0–255 scale)."""
    import numpy as np

    a = np.asarray(bundled, dtype=np.float64)
    b = np.asarray(regenerated, dtype=np.float64)
    if a.shape != b.shape:
        return Verdict(
            False, f"size {b.shape[1]}×{b.shape[0]} regenerated, {a.shape[1]}×{a.shape[0]} bundled"
        )
    scale = 255.0 if a.max(initial=0) <= 1.0 and b.max(initial=0) <= 1.0 else 1.0
    diff = (a - b) * scale
    if not diff.any():
        return Verdict(True, "identical pixel by pixel")
    rms = float(np.sqrt(np.mean(diff**2)))
    differing = float(np.mean(np.any(diff != 0, axis=-1) if diff.ndim == 3 else diff != 0))
    detail = f"RMS difference {rms:.3f} (tolerance {max_rms:g}), {100 * differing:.2f}% of pixels differ"
    return Verdict(rms <= max_rms, ("within tolerance: " if rms <= max_rms else "") + detail)


def compare_bytes(bundled: bytes, regenerated: bytes) -> Verdict:
    return Verdict(True, "identical") if bundled == regenerated else Verdict(False, "bytes differ")
