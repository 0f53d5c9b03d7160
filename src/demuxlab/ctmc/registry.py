"""The pattern models, one record each (:class:`demuxlab.ctmc.pattern.PatternModel`, declared as ``MODEL`` in
``ctmc/<pattern>.py``): what ``rates.py`` builds and the calibration fits, looked up by pattern name.

A pattern's model is its module and one line of :data:`BUILT_IN`; :func:`register` adds one at run time
(a test's toy pattern: ``tests/ctmc/test_registry.py``). Every pattern of the spec's vocabulary has a model
(:data:`demuxlab.vocab.PATTERNS`), and its calibration concurrency, one thread per role, is the one the
vocabulary gives the specs (:data:`demuxlab.vocab.CALIBRATION_THREADS`, which specs read without loading
the models): checked here, at import.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from demuxlab import vocab
from demuxlab.ctmc import hsha, lf, multireactor, proactor, reactor, tpc, uring, uring_shared
from demuxlab.ctmc.pattern import PatternModel
from demuxlab.errors import DemuxlabError

BUILT_IN: tuple[PatternModel, ...] = (
    reactor.MODEL,
    hsha.MODEL,
    lf.MODEL,
    tpc.MODEL,
    proactor.MODEL,
    uring.MODEL,
    multireactor.MODEL,
    uring_shared.MODEL,
)
_MODELS: dict[str, PatternModel] = {}


def register(model: PatternModel) -> PatternModel:
    """Add ``model`` (its pattern must not have one yet)."""
    if model.pattern in _MODELS:
        raise DemuxlabError(f"pattern model {model.pattern}: registered twice")
    _MODELS[model.pattern] = model
    return model


def unregister(pattern: str) -> None:
    """Drop a pattern added by :func:`register` (a built-in one stays)."""
    if any(m.pattern == pattern for m in BUILT_IN):
        raise DemuxlabError(f"pattern model {pattern}: built in, not to be unregistered")
    _MODELS.pop(pattern, None)


@contextmanager
def registered(model: PatternModel) -> Iterator[PatternModel]:
    """``model`` registered for the ``with`` block."""
    register(model)
    try:
        yield model
    finally:
        unregister(model.pattern)


def patterns() -> tuple[str, ...]:
    """Every pattern with a model, built-in ones first in :data:`demuxlab.vocab.PATTERNS` order."""
    return tuple(_MODELS)


def model_of(pattern: str) -> PatternModel:
    """The model of ``pattern``; one clear error for a pattern without one."""
    got = _MODELS.get(pattern) if isinstance(pattern, str) else None
    if got is None:
        raise DemuxlabError(f"pattern: must be one of {', '.join(_MODELS)}, got {pattern!r}")
    return got


for _model in sorted(BUILT_IN, key=lambda m: vocab.PATTERNS.index(m.pattern)):
    register(_model)
if set(_MODELS) != set(vocab.PATTERNS):
    raise DemuxlabError(
        f"ctmc registry: models {sorted(_MODELS)} are not the patterns {sorted(vocab.PATTERNS)}"
    )
for _model in BUILT_IN:
    if _model.calibration_threads != vocab.CALIBRATION_THREADS[_model.pattern]:
        raise DemuxlabError(
            f"ctmc registry: {_model.pattern}'s roles make {_model.calibration_threads} calibration threads, "
            f"vocab.CALIBRATION_THREADS says {vocab.CALIBRATION_THREADS[_model.pattern]}"
        )
