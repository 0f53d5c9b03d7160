"""What a bundle holds and how it is described: paths, the SHA-256 manifest, RO-Crate metadata, README.

Everything here is pure (bytes and dicts in, bytes and dicts out), so it is deterministic by construction.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

FORMAT = "demuxlab.bundle/1"
# Every member of the archive lives under this folder (a tarball that extracts into one directory).
PREFIX = "demuxlab-bundle"
MANIFEST = "MANIFEST.sha256"
CRATE = "ro-crate-metadata.json"
BUNDLE_JSON = "bundle.json"
README = "README.md"
# Fixed metadata of every archive member: deterministic bytes whoever creates it, whenever.
MTIME = 315532800  # 1980-01-01T00:00:00Z (the zip epoch; some tools mistrust 0)

CRATE_CONTEXT = "https://w3id.org/ro/crate/1.1/context"
CRATE_PROFILE = "https://w3id.org/ro/crate/1.1"

_MIME = {
    ".json": "application/json",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".csv": "text/csv",
    ".md": "text/markdown",
    ".txt": "text/plain",
    ".sha256": "text/plain",
    ".png": "image/png",
    ".svg": "image/svg+xml",
    ".pdf": "application/pdf",
    ".parquet": "application/vnd.apache.parquet",
    ".tar": "application/x-tar",
    ".patch": "text/x-diff",
}


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_json(doc: Any) -> bytes:
    """JSON with sorted keys and a trailing newline: the same document always gives the same bytes."""
    return (json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()


def mime_type(path: str) -> str:
    for suffix, mime in _MIME.items():
        if path.endswith(suffix):
            return mime
    return "application/octet-stream"


# -- manifest ----------------------------------------------------------------------------------------------


def make_manifest(digests: Mapping[str, str]) -> bytes:
    """``sha256sum`` format (``<hex>  <path>``), sorted by path, so ``sha256sum -c`` checks it too."""
    return "".join(f"{digests[path]}  {path}\n" for path in sorted(digests)).encode()


_MANIFEST_LINE = re.compile(r"^([0-9a-f]{64})  (\S(?:.*\S)?)$")


def parse_manifest(data: bytes, where: str = MANIFEST) -> dict[str, str]:
    """Path → SHA-256 from a manifest; a malformed or duplicated line is an error naming the line."""
    out: dict[str, str] = {}
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise ValueError(f"{where}: not UTF-8 text") from None
    for n, line in enumerate(text.splitlines(), 1):
        m = _MANIFEST_LINE.match(line)
        if m is None:
            raise ValueError(f"{where}: line {n}: not '<sha256>  <path>': {line[:80]!r}")
        if m.group(2) in out:
            raise ValueError(f"{where}: line {n}: {m.group(2)} listed twice")
        out[m.group(2)] = m.group(1)
    return out


def compare_manifest(expected: Mapping[str, str], actual: Mapping[str, str]) -> list[str]:
    """One line per problem: files tampered with (hash differs), missing (listed, absent) or extra."""
    problems = []
    for path in sorted(set(expected) | set(actual)):
        if path not in actual:
            problems.append(f"missing: {path}")
        elif path not in expected:
            problems.append(f"extra (not in {MANIFEST}): {path}")
        elif expected[path] != actual[path]:
            problems.append(
                f"tampered: {path} (sha256 {actual[path][:12]}…, manifest says {expected[path][:12]}…)"
            )
    return problems


# -- RO-Crate 1.1 ------------------------------------------------------------------------------------------


def make_crate(
    files: Mapping[str, bytes | int],
    digests: Mapping[str, str],
    *,
    name: str,
    description: str,
    date_published: str,
    license_id: str = "https://spdx.org/licenses/MIT",
) -> dict[str, Any]:
    """RO-Crate 1.1 metadata: the metadata descriptor, the root dataset and one File entity per file.

    ``files`` maps each path (relative to the crate root, without the crate and the manifest) to its bytes
    or size. ``date_published`` is an ISO 8601 date taken from the data (not the clock), for determinism.
    """
    parts = sorted(files)
    graph: list[dict[str, Any]] = [
        {
            "@id": CRATE,
            "@type": "CreativeWork",
            "conformsTo": {"@id": CRATE_PROFILE},
            "about": {"@id": "./"},
        },
        {
            "@id": "./",
            "@type": "Dataset",
            "name": name,
            "description": description,
            "datePublished": date_published,
            "license": {"@id": license_id},
            "hasPart": [{"@id": p} for p in parts],
        },
        {"@id": license_id, "@type": "CreativeWork", "name": license_id.rsplit("/", 1)[-1]},
    ]
    for path in parts:
        content = files[path]
        size = content if isinstance(content, int) else len(content)
        graph.append(
            {
                "@id": path,
                "@type": "File",
                "name": path.rsplit("/", 1)[-1],
                "contentSize": str(size),
                "encodingFormat": mime_type(path),
                "sha256": digests[path],
            }
        )
    return {"@context": CRATE_CONTEXT, "@graph": graph}


def check_crate(doc: Any, digests: Mapping[str, str]) -> list[str]:
    """Problems of an RO-Crate document against the manifest's files (empty list: valid)."""
    if not isinstance(doc, dict):
        return [f"{CRATE}: not a JSON object"]
    problems: list[str] = []
    if doc.get("@context") != CRATE_CONTEXT:
        problems.append(f"{CRATE}: @context is {doc.get('@context')!r}, not {CRATE_CONTEXT}")
    graph = doc.get("@graph")
    if not isinstance(graph, list) or not all(isinstance(e, dict) and "@id" in e for e in graph):
        return [*problems, f"{CRATE}: @graph is not a list of entities with @id"]
    entities = {e["@id"]: e for e in graph}
    if len(entities) != len(graph):
        problems.append(f"{CRATE}: @graph has duplicate @id")
    meta = entities.get(CRATE)
    if meta is None or (meta.get("conformsTo") or {}).get("@id") != CRATE_PROFILE:
        problems.append(f"{CRATE}: no metadata descriptor conforming to {CRATE_PROFILE}")
    elif (meta.get("about") or {}).get("@id") != "./":
        problems.append(f"{CRATE}: the metadata descriptor is not about the root dataset ./")
    root = entities.get("./")
    if root is None or root.get("@type") != "Dataset":
        return [*problems, f"{CRATE}: no root Dataset ./"]
    for key in ("name", "description", "datePublished", "license"):
        if not root.get(key):
            problems.append(f"{CRATE}: root dataset lacks {key}")
    parts = {p.get("@id") for p in root.get("hasPart") or [] if isinstance(p, dict)}
    described = {i for i, e in entities.items() if e.get("@type") == "File"}
    expected = set(digests) - {CRATE}
    for path in sorted(expected - described):
        problems.append(f"{CRATE}: file {path} has no File entity")
    for path in sorted(described - expected):
        problems.append(f"{CRATE}: File entity {path} is not in the bundle")
    for path in sorted(expected - parts):
        problems.append(f"{CRATE}: file {path} is not in the root dataset's hasPart")
    for path in sorted(expected & described):
        if entities[path].get("sha256") != digests[path]:
            problems.append(f"{CRATE}: File entity {path}: sha256 differs from the file")
    return problems


# -- README ------------------------------------------------------------------------------------------------


def make_readme(
    bundle: Mapping[str, Any], file_name: str, contents: Sequence[tuple[str, str]], figures: Iterable[str]
) -> bytes:
    """The bundle's own README: what is inside and the commands that check, regenerate and rerun it."""
    exps = bundle["experiments"]
    names = ", ".join(f"`{e['name']}`" for e in exps)
    rev = bundle.get("source", {}).get("revision") or "unknown"
    lines = [
        f"# demuxlab reproducibility bundle: {names}",
        "",
        f"Created by demuxlab {bundle.get('demuxlab_version')} from source revision `{rev}`.",
        "Every file is listed with its SHA-256 in `MANIFEST.sha256` (`sha256sum -c MANIFEST.sha256` works);",
        "`ro-crate-metadata.json` describes the bundle as an RO-Crate 1.1.",
        "",
        "## Experiments",
        "",
        "| experiment | spec sha256 | runs (ok / failed) | reproduces |",
        "|---|---|---|---|",
    ]
    for e in exps:
        lines.append(
            f"| `{e['name']}` | `{e['spec_sha256'][:16]}…` | {e['runs_ok']} / {e['runs_failed']} "
            f"| {e.get('reproduces') or 'none'} |"
        )
    lines += ["", "## What is inside", "", "| path | what |", "|---|---|"]
    lines += [f"| `{path}` | {what} |" for path, what in contents]
    lines += ["", "Figures as the workflow produced them:", ""]
    lines += [f"- `{f}`" for f in figures] or ["- (none)"]
    lines += [
        "",
        "## Commands",
        "",
        "With demuxlab installed (its source is in `source/`: `tar -xf source/demuxlab-source.tar`,",
        "then `cd demuxlab && make setup build`):",
        "",
        "```sh",
        f"demuxlab bundle verify {file_name}                  # every checksum and the RO-Crate",
        f"demuxlab bundle reproduce {file_name} --out regen   # regenerate every figure and table, compare",
        f"demuxlab bundle import {file_name}                  # load the data into a demuxlab database",
        f"demuxlab bundle rerun {file_name} --profile local   # run the experiments again on this machine",
        f"demuxlab bundle rerun {file_name} --profile cluster # ... or on your inventory's hosts",
        "```",
        "",
        "`reproduce` needs neither network nor the original database: it loads `db/` into a private",
        "temporary PostgreSQL and runs the report and validation stages on it. `rerun` runs the bundle's",
        "own binaries (`binaries/`, digests in `binaries/binaries.json`) on its specs as new experiments",
        "named `<name>-rerun`, linked to the originals (`experiments.rerun_of_id`).",
        "",
        "The data without demuxlab: `experiments/<name>/runs/*.json` are the raw run records,",
        "`db/*.parquet` the database tables of these experiments (samples: one row per run and second).",
        "",
    ]
    return "\n".join(lines).encode()
