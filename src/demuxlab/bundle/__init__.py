"""Reproducibility bundles: one deterministic archive a paper can attach (docs/CONTRACTS.md §8).

Pure parts (no I/O): :mod:`~demuxlab.bundle.layout` (paths, SHA-256 manifest, RO-Crate, README),
:mod:`~demuxlab.bundle.safety` (archive member checks, secret scan), :mod:`~demuxlab.bundle.compare`
(tables and figures). I/O: :mod:`~demuxlab.bundle.archive` (deterministic tar writer, safe reader),
:mod:`~demuxlab.bundle.dump` (database subset ⇄ Parquet), :mod:`~demuxlab.bundle.create` (with
:mod:`~demuxlab.bundle.provenance`: the source and the environment) and :mod:`~demuxlab.bundle.ops`
(verify, import, reproduce, rerun), :mod:`~demuxlab.cli.bundle`.
"""
