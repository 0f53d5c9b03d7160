"""``demuxlab bundle create``: gather an experiment's evidence into one deterministic archive.

Sources: the workflow's working directory (``results/<experiment>/runs``, ``failures``, ``model``,
``report``, ``results/facts``, ``results/build``), the database subset (:mod:`~demuxlab.bundle.dump`), the
built binaries, the git repository (a ``git archive`` of the runs' revision) and this machine's
environment. Every file is scanned for secrets before anything is written; the archive appears whole
(temporary file + rename) or not at all.
"""

from __future__ import annotations

import importlib.metadata
import io
import json
import os
import subprocess
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from demuxlab import paths
from demuxlab.bundle import layout, provenance
from demuxlab.bundle.archive import BundleError, Entry, compression_of, write_archive
from demuxlab.bundle.safety import Finding, scan_secrets
from demuxlab.vocab import RUN_OK

FIGURE_SUFFIXES = (".png", ".svg", ".pdf")


@dataclass
class Options:
    experiments: Sequence[str]
    out: Path
    workdir: Path  # the workflow's working directory (holds results/)
    experiments_dir: Path
    url: str | None = None
    images: bool = False
    workflow_config: Mapping[str, Any] | None = None


@dataclass
class Collected:
    files: dict[str, Entry] = field(default_factory=dict)
    contents: list[tuple[str, str]] = field(default_factory=list)

    def add(self, rel: str, data: bytes, *, executable: bool = False) -> None:
        if rel in self.files:
            raise BundleError(f"bundle: {rel} would be written twice")
        self.files[rel] = Entry(data=data, executable=executable)

    def describe(self, rel: str, what: str) -> None:
        self.contents.append((rel, what))


def _read_records(runs_dir: Path) -> list[tuple[Path, bytes, dict[str, Any]]]:
    out = []
    for path in sorted(runs_dir.glob("*.json")):
        raw = path.read_bytes()
        try:
            doc = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise BundleError(
                f"{path}: run record is not valid JSON (line {exc.lineno}: {exc.msg})"
            ) from None
        if not isinstance(doc, dict) or not isinstance(doc.get("experiment"), dict):
            raise BundleError(f"{path}: field experiment: missing (not a run record)")
        out.append((path, raw, doc))
    return out


def _spec_text(
    name: str, sha: str, records: Sequence[dict[str, Any]], opts: Options, db_text: str | None
) -> str:
    """The spec exactly as run: the file if it still hashes to ``sha``, else the records' or the DB's copy."""
    candidates: list[tuple[str, str | None]] = []
    spec_file = opts.experiments_dir / f"{name}.yaml"
    if spec_file.is_file():
        candidates.append((str(spec_file), spec_file.read_bytes().decode(errors="replace")))
    candidates += [("run record", r["experiment"].get("spec_text")) for r in records[:1]]
    candidates.append(("database", db_text))
    for _, text in candidates:
        if text is not None and layout.sha256_hex(text.encode()) == sha:
            return text
    raise BundleError(
        f"experiment {name!r}: the spec as run (sha256 {sha[:12]}) is neither {spec_file}, nor in the run "
        "records, nor in the database"
    )


def _spec_from_text(name: str, text: str, pairs: Any) -> Any:
    from demuxlab.spec import load_spec

    with tempfile.TemporaryDirectory(prefix="dlx-bundle-spec-") as tmp:
        path = Path(tmp) / f"{name}.yaml"
        path.write_bytes(text.encode())
        return load_spec(path, pairs=pairs)


def _plan(spec: Any) -> dict[str, Any]:
    from demuxlab.spec import run_id, run_order

    runs = [
        {"run_id": run_id(spec, point, rep), "repeat": rep, "point_key": point.point_key, **point.to_json()}
        for point, rep in run_order(spec)
    ]
    return {"experiment": spec.name, "spec_sha256": spec.sha256, "runs": runs}


def _known_secrets(url: str | None) -> list[bytes]:
    from sqlalchemy import make_url

    out = []
    for given in (url, os.environ.get("DEMUXLAB_DATABASE_URL")):
        if given:
            try:
                password = make_url(given).password
            except Exception:
                password = None
            if password:
                out += [str(password).encode(), unquote(str(password)).encode()]
    if os.environ.get("PGPASSWORD"):
        out.append(os.environ["PGPASSWORD"].encode())
    return out


def scan(files: Mapping[str, Entry], known: Sequence[bytes]) -> list[Finding]:
    """Secrets in every file; inside the source archive, each member (strong patterns only)."""
    findings: list[Finding] = []
    for rel in sorted(files):
        entry = files[rel]
        if rel.startswith("images/"):
            continue  # FROM-scratch images of the static binaries (scanned in binaries/); not scanned
        data = entry.data if entry.data is not None else entry.source.read_bytes()  # type: ignore[union-attr]
        if rel.endswith("source/demuxlab-source.tar"):
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                for member in tar:
                    f = tar.extractfile(member) if member.isreg() else None
                    if f is None:
                        continue
                    # The project's tests and docs show example URLs with made-up passwords.
                    inner = member.name.split("/", 1)[-1]
                    examples = inner.startswith("tests/") or inner.endswith(".md")
                    findings += scan_secrets(
                        f"{rel}:{member.name}",
                        f.read(),
                        key_values=False,
                        known=known,
                        url_passwords=not examples,
                    )
            continue
        findings += scan_secrets(rel, data, known=known)
    return findings


def _docker_save(image: str, dest: Path) -> None:
    with dest.open("wb") as out:
        proc = subprocess.run(
            ["docker", "save", image], stdout=out, stderr=subprocess.PIPE, timeout=600, check=False
        )
    if proc.returncode != 0:
        raise BundleError(f"docker save {image}: {proc.stderr.decode().strip().splitlines()[-1:]}")


Records = list[tuple[Path, bytes, dict[str, Any]]]  # (file, its bytes, its JSON) per run record


@dataclass
class Gathered:
    """What the experiments' files say that the bundle's document records."""

    docs: list[dict[str, Any]] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)
    revisions: set[str] = field(default_factory=set)
    images: set[str] = field(default_factory=set)
    finished: list[str] = field(default_factory=list)


def create(opts: Options) -> dict[str, Any]:
    """Build the bundle described by ``opts``; returns its ``bundle.json`` document."""
    from demuxlab.designs import valid_pairs

    compression_of(opts.out)
    if not opts.experiments:
        raise BundleError("bundle create: name at least one experiment")
    col = Collected()
    pairs = valid_pairs()
    col.add("pairs.json", layout.canonical_json([p.to_json() for p in pairs]))
    col.describe(
        "pairs.json", "the valid pattern × notifier pairs of the server binary (`demux-server --list`)"
    )
    per_exp = _experiments(opts)
    dumped = _add_database(col, opts, per_exp)
    db_spec = {(r["name"], r["spec_sha256"]): r["spec_text"] for r in dumped.rows["experiments"]}
    gathered = Gathered()
    for name, sha, records in per_exp:
        _add_experiment(col, opts, gathered, (name, sha, records), pairs, db_spec.get((name, sha)))
    _describe_experiments(col)
    for host in dumped.rows["hosts"]:
        rel = f"hosts/{host['hostname']}-{host['facts_sha256'][:12]}.json"
        col.add(rel, layout.canonical_json(host["facts"]))
    col.describe("hosts/", "topology and noise facts of every host the runs used")
    _add_workflow(col, opts)
    bins = _add_binaries(col, per_exp)
    tmpdir = tempfile.TemporaryDirectory(prefix="dlx-bundle-img-")
    try:
        if opts.images:
            _add_images(col, gathered.images, Path(tmpdir.name))
        bundle_doc = _add_documents(col, opts, gathered, dumped, bins)
        _scan_and_write(col, opts, [n for n, _, _ in per_exp], gathered.finished)
    finally:
        tmpdir.cleanup()
    return bundle_doc


def _experiments(opts: Options) -> list[tuple[str, str, Records]]:
    """Each experiment's name, spec SHA-256 and run records (one spec version per experiment)."""
    per_exp: list[tuple[str, str, Records]] = []
    for name in opts.experiments:
        results = opts.workdir / "results" / name
        records = _read_records(results / "runs")
        if not records:
            raise BundleError(
                f"experiment {name!r}: no run records in {results / 'runs'} (run the workflow first)"
            )
        shas = sorted({doc["experiment"].get("spec_sha256") for _, _, doc in records})
        if len(shas) != 1:
            raise BundleError(
                f"experiment {name!r}: run records of {len(shas)} spec versions in {results / 'runs'}"
            )
        per_exp.append((name, shas[0], records))
    return per_exp


def _add_database(col: Collected, opts: Options, per_exp: Sequence[tuple[str, str, Records]]) -> Any:
    """The database rows of the experiments (every one must be there), one Parquet file per table."""
    from demuxlab.bundle import dump as dumpmod
    from demuxlab.db.engine import get_engine
    from demuxlab.db.migrations import ensure_schema

    engine = get_engine(opts.url)
    ensure_schema(engine)
    dumped = dumpmod.dump(engine, [(n, s) for n, s, _ in per_exp])
    found = {(r["name"], r["spec_sha256"]) for r in dumped.rows["experiments"]}
    for name, sha, _ in per_exp:
        if (name, sha) not in found:
            raise BundleError(
                f"experiment {name!r} (spec {sha[:12]}) is not in the database (ingest it first)"
            )
    for rel, data in dumped.files.items():
        col.add(rel, data)
    col.describe(
        "db/", "the database rows of these experiments, one Parquet file per table (`import` loads it)"
    )
    col.describe("db/samples.parquet", "per-second throughput of every run (run_id, second, msgs/s)")
    col.describe("db/op_timings.parquet", "per-operation timings of the instrumented runs")
    return dumped


def _add_experiment(
    col: Collected,
    opts: Options,
    gathered: Gathered,
    experiment: tuple[str, str, Records],
    pairs: Any,
    db_text: str | None,
) -> None:
    """One experiment's spec, plan, run records, pinning and the workflow's files of it."""
    name, sha, records = experiment
    base = f"experiments/{name}"
    text = _spec_text(name, sha, [doc for _, _, doc in records], opts, db_text)
    spec = _spec_from_text(name, text, pairs)
    col.add(f"{base}/spec.yaml", text.encode())
    col.add(f"{base}/spec.sha256", f"{sha}  spec.yaml\n".encode())
    col.add(f"{base}/plan.json", layout.canonical_json(_plan(spec)))
    pinning: dict[str, Any] = {}
    ok = failed = 0
    for path, raw, doc in records:
        col.add(f"{base}/runs/{path.name}", raw)
        pinning[str(doc.get("run_id"))] = doc.get("pinning")
        ok, failed = (ok + 1, failed) if doc.get("status") == RUN_OK else (ok, failed + 1)
        if doc["experiment"].get("git_rev"):
            gathered.revisions.add(str(doc["experiment"]["git_rev"]))
        if doc.get("finished_at"):
            gathered.finished.append(str(doc["finished_at"]))
        for art in (doc.get("artifacts") or {}).values():
            if isinstance(art, dict) and art.get("kind") == "image" and art.get("image"):
                gathered.images.add(str(art["image"]))
    col.add(f"{base}/pinning.json", layout.canonical_json(pinning))
    results = opts.workdir / "results" / name
    for sub in ("failures", "model", "report", "adaptive"):
        folder = results / sub
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")):
            rel = f"{base}/{sub}/{path.relative_to(folder).as_posix()}"
            col.add(rel, path.read_bytes())
            if sub == "report" and path.suffix in FIGURE_SUFFIXES:
                gathered.figures.append(rel)
    gathered.docs.append(
        {
            "name": name,
            "spec_sha256": sha,
            "reproduces": spec.reproduces,
            "runs": len(records),
            "runs_ok": ok,
            "runs_failed": failed,
            "path": base,
        }
    )


def _describe_experiments(col: Collected) -> None:
    col.describe("experiments/<name>/spec.yaml", "the spec as run (its SHA-256 in `spec.sha256`)")
    col.describe(
        "experiments/<name>/plan.json", "the resolved points and the randomized run order, with run ids"
    )
    col.describe("experiments/<name>/runs/", "every run record, raw JSON as `demuxlab run-point` wrote it")
    col.describe("experiments/<name>/pinning.json", "the pinning plan of every run (run id → CPUs)")
    col.describe(
        "experiments/<name>/model/", "calibrations and predictions (CTMC models), as the workflow wrote them"
    )
    col.describe(
        "experiments/<name>/report/", "tables (CSV) and figures exactly as the workflow produced them"
    )
    if any("/adaptive/" in rel for rel in col.files):
        col.describe(
            "experiments/<name>/adaptive/",
            "an adaptive experiment's rounds and decisions (docs/adaptive.md); its runs/ replay them: "
            "`demuxlab adaptive decisions spec.yaml --records runs`",
        )


def _add_workflow(col: Collected, opts: Options) -> None:
    """The workflow: its configuration and profiles, the facts and build manifests it recorded."""
    wf = paths.repo_root() / "workflows"
    for rel, src in (
        ("workflow/config.yaml", wf / "config" / "config.yaml"),
        ("workflow/profiles/local/config.yaml", wf / "local" / "config.yaml"),
        ("workflow/profiles/cluster/config.yaml", wf / "cluster" / "config.yaml"),
    ):
        if src.is_file():
            col.add(rel, src.read_bytes())
    if opts.workflow_config is not None:
        col.add("workflow/effective-config.json", layout.canonical_json(dict(opts.workflow_config)))
    for kind in ("facts", "build"):
        base_dir = opts.workdir / "results" / kind
        for path in sorted(p for p in base_dir.rglob("*.json") if p.is_file()) if base_dir.is_dir() else []:
            col.add(f"workflow/{kind}/{path.relative_to(base_dir).as_posix()}", path.read_bytes())
    col.describe("workflow/", "workflow configuration, profiles, host facts and build manifests as recorded")


def _add_binaries(col: Collected, per_exp: Sequence[tuple[str, str, Records]]) -> dict[str, Any]:
    """The binaries the runs used (static), with digests and whether the runs used them."""
    bins: dict[str, Any] = {}
    run_digests = {
        str(((doc.get("artifacts") or {}).get(role) or {}).get("sha256"))
        for _, _, records in per_exp
        for _, _, doc in records
        for role in ("server", "client")
    }
    # wake-cost measured the client's wake-up cost beside the instrumented runs on one host (pinning.wake_us,
    # demuxlab.launch.wake): a rerun measures it again with the bundled one.
    woke = any(
        isinstance(doc.get("pinning"), dict) and doc["pinning"].get("wake_us") is not None
        for _, _, records in per_exp
        for _, _, doc in records
    )
    for name in ("demux-server", "demux-client", "wake-cost"):
        src = paths.bin_dir() / name
        if not src.is_file():
            raise BundleError(f"{src}: binary not found (run `make build`)")
        data = src.read_bytes()
        digest = layout.sha256_hex(data)
        col.add(f"binaries/{name}", data, executable=True)
        used = woke if name == "wake-cost" else digest in run_digests
        bins[name] = {"sha256": digest, "size": len(data), "used_by_runs": used}
    col.add("binaries/binaries.json", layout.canonical_json(bins))
    col.describe(
        "binaries/", "the static server and client binaries and wake-cost, SHA-256 in `binaries.json`"
    )
    return bins


def _add_images(col: Collected, images: set[str], tmp: Path) -> None:
    """The runs' container images (``docker save`` into ``tmp``, archived from there)."""
    for image in sorted(images):
        dest = tmp / (image.replace("/", "_").replace(":", "_") + ".tar")
        _docker_save(image, dest)
        col.files[f"images/{dest.name}"] = Entry(source=dest)
    if images:
        col.describe("images/", "the container images of the runs (`docker save`; `docker load -i` them)")


def _add_documents(
    col: Collected, opts: Options, gathered: Gathered, dumped: Any, bins: dict[str, Any]
) -> dict[str, Any]:
    """The source, the environment, ``bundle.json`` and the README; returns the bundle's document."""
    source, source_files = provenance.source(gathered.revisions)
    for rel, data, what in source_files:
        col.add(rel, data)
        col.describe(rel, what)
    col.add("environment/lock.json", layout.canonical_json(provenance.environment(dumped.rows["hosts"])))
    col.describe("environment/lock.json", "Python packages with versions, compiler, kernel and distribution")
    bundle_doc = {
        "format": layout.FORMAT,
        "demuxlab_version": importlib.metadata.version("demuxlab"),
        "experiments": gathered.docs,
        "source": source,
        "database": {
            "dump": "db/",
            "alembic_revision": json.loads(dumped.files["db/schema.json"])["alembic_revision"],
        },
        "binaries": bins,
        "images": sorted(gathered.images) if opts.images else [],
        "figures": sorted(gathered.figures),
        "figure_tolerance": {"max_rms": FIGURE_RMS_TOLERANCE, "note": "RMS over 0–255 RGBA channels"},
    }
    col.add(layout.BUNDLE_JSON, layout.canonical_json(bundle_doc))
    col.describe(layout.BUNDLE_JSON, "what the bundle holds, for programs")
    col.add(
        layout.README,
        layout.make_readme(bundle_doc, opts.out.name, sorted(col.contents), sorted(gathered.figures)),
    )
    return bundle_doc


def _scan_and_write(col: Collected, opts: Options, names: Sequence[str], finished: Sequence[str]) -> None:
    """Refuse the bundle if any file holds a secret; else add the RO-Crate and the manifest and write the
    archive (whole or not at all)."""
    findings = scan(col.files, _known_secrets(opts.url))
    if findings:
        shown = "; ".join(str(f) for f in findings[:5])
        more = f" (and {len(findings) - 5} more)" if len(findings) > 5 else ""
        raise BundleError(f"bundle refused: secrets found: {shown}{more}")
    digests = {
        rel: (layout.sha256_hex(e.data) if e.data is not None else _file_sha(e.source))
        for rel, e in col.files.items()
    }
    sizes = {rel: e.size() for rel, e in col.files.items()}
    date = max(finished)[:10] if finished else "1980-01-01"
    crate = layout.make_crate(
        sizes,
        digests,
        name=f"demuxlab bundle: {', '.join(names)}",
        description="Specs, run records, database rows, figures, binaries and source of experiments.",
        date_published=date,
    )
    col.add(layout.CRATE, layout.canonical_json(crate))
    digests[layout.CRATE] = layout.sha256_hex(col.files[layout.CRATE].data or b"")
    col.add(layout.MANIFEST, layout.make_manifest(digests))
    write_archive(opts.out, col.files)


FIGURE_RMS_TOLERANCE = 1.0


def _file_sha(path: Path | None) -> str:
    import hashlib

    assert path is not None
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()
