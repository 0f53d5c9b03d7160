"""verify, import, reproduce and rerun a bundle.

Every operation first extracts the archive with :func:`~demuxlab.bundle.archive.extract` (hostile archive
checks) into a private folder and checks it against its manifest and RO-Crate; import and reproduce then
only read data (Parquet, JSON, YAML, CSV, PNG) — nothing from the bundle is ever executed or imported as
code. ``rerun`` is the one operation that runs the bundle's binaries, by design, after verifying them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from demuxlab.bundle import layout
from demuxlab.bundle.archive import BundleError, extract
from demuxlab.bundle.safety import Limits


@dataclass
class Opened:
    path: Path
    root: Path
    digests: dict[str, str]
    problems: list[str]
    doc: dict[str, Any] = field(default_factory=dict)

    def read(self, rel: str) -> bytes:
        return (self.root / rel).read_bytes()


def check(path: Path, root: Path, digests: dict[str, str]) -> tuple[list[str], dict[str, Any]]:
    """Problems of an extracted bundle: manifest (tampered, missing, extra), RO-Crate, ``bundle.json``."""
    if layout.MANIFEST not in digests:
        return [f"{path}: no {layout.MANIFEST}: not a demuxlab bundle"], {}
    try:
        manifest = layout.parse_manifest((root / layout.MANIFEST).read_bytes())
    except ValueError as exc:
        return [str(exc)], {}
    actual = {k: v for k, v in digests.items() if k != layout.MANIFEST}
    problems = layout.compare_manifest(manifest, actual)
    doc: dict[str, Any] = {}
    if layout.CRATE in actual:
        try:
            crate = json.loads((root / layout.CRATE).read_bytes())
        except (json.JSONDecodeError, UnicodeDecodeError):
            problems.append(f"{layout.CRATE}: not valid JSON")
        else:
            problems += layout.check_crate(crate, {k: v for k, v in manifest.items() if k in actual})
    if layout.BUNDLE_JSON in actual:
        try:
            doc = json.loads((root / layout.BUNDLE_JSON).read_bytes())
        except (json.JSONDecodeError, UnicodeDecodeError):
            problems.append(f"{layout.BUNDLE_JSON}: not valid JSON")
        else:
            if not isinstance(doc, dict) or doc.get("format") != layout.FORMAT:
                problems.append(f"{layout.BUNDLE_JSON}: format is not {layout.FORMAT}")
                doc = {}
    return problems, doc


@contextlib.contextmanager
def opened(path: Path, *, limits: Limits | None = None, keep: Path | None = None) -> Iterator[Opened]:
    """Extract and check ``path``; the extraction is removed afterwards unless it goes to ``keep``."""
    tmp = None
    if keep is None:
        tmp = tempfile.mkdtemp(prefix="dlx-bundle-")
        root = Path(tmp) / "bundle"
    else:
        root = keep
    try:
        digests = extract(path, root, limits)
        problems, doc = check(path, root, digests)
        yield Opened(path, root, digests, problems, doc)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def verify(path: Path, limits: Limits | None = None) -> tuple[list[str], int]:
    """(problems, number of files checked)."""
    with opened(path, limits=limits) as b:
        return b.problems, len(b.digests)


def _require_ok(b: Opened) -> None:
    if b.problems or not b.doc:
        first = b.problems[0] if b.problems else f"{layout.BUNDLE_JSON} missing"
        more = f" (and {len(b.problems) - 1} more)" if len(b.problems) > 1 else ""
        raise BundleError(f"{b.path}: does not verify: {first}{more} (see `demuxlab bundle verify`)")


# -- import ------------------------------------------------------------------------------------------------


def default_import_home() -> Path:
    from demuxlab import paths

    return paths.state_dir() / "bundles"


def target_url(url: str | None, home: Path | None) -> str:
    """``url`` as given, else the embedded cluster under ``home`` (default :func:`default_import_home`),
    created and started on demand."""
    if url:
        from demuxlab.db.engine import parse_url

        return parse_url(url, origin="--database").render_as_string(hide_password=False)
    from demuxlab.db.embedded import Cluster

    cluster = Cluster(home or default_import_home())
    cluster.ensure_running()
    return cluster.url()


def _load_into(b: Opened, url: str) -> Any:
    from sqlalchemy.exc import DBAPIError, StatementError

    from demuxlab.bundle import dump
    from demuxlab.db.engine import get_engine
    from demuxlab.db.migrations import ensure_schema

    files = {rel: b.read(rel) for rel in b.digests if rel.startswith("db/")}
    rows = dump.read_parquet(files)
    engine = get_engine(url)
    ensure_schema(engine)
    try:
        return dump.load(engine, rows)
    except (DBAPIError, StatementError, KeyError) as exc:
        lines = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        detail = lines[0] if lines else type(exc).__name__
        raise BundleError(f"{b.path}: db/ does not load (nothing was written): {detail}") from None


def import_bundle(path: Path, url: str, limits: Limits | None = None) -> Any:
    with opened(path, limits=limits) as b:
        _require_ok(b)
        return _load_into(b, url)


# -- reproduce ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    path: str
    status: str  # ok | differs | missing | unchecked
    detail: str


def _pairs(b: Opened) -> Any:
    from demuxlab.designs import load_pairs_json

    return load_pairs_json(b.read("pairs.json").decode(), source=f"{b.path}: pairs.json")


def _spec(b: Opened, name: str, pairs: Any, tmp: Path) -> Any:
    from demuxlab.spec import load_spec

    path = tmp / "specs" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b.read(f"experiments/{name}/spec.yaml"))
    return load_spec(path, pairs=pairs)


def _model_method(b: Opened) -> str:
    rel = "workflow/effective-config.json"
    if rel in b.digests:
        cfg = json.loads(b.read(rel))
        return str((cfg.get("model") or {}).get("method") or "ssa")
    return "ssa"


@contextlib.contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def _regenerate(b: Opened, url: str, out: Path, tmp: Path) -> None:
    """Run the report stages on the loaded data: the same code the workflow runs."""
    from demuxlab.claims.report import write_claims
    from demuxlab.report import write_report
    from demuxlab.validation import write_validation
    from demuxlab.validation.store import refusal_reasons

    pairs = _pairs(b)
    method = _model_method(b)
    with _env("DEMUXLAB_DATABASE_URL", url):
        for exp in b.doc["experiments"]:
            name = exp["name"]
            spec = _spec(b, name, pairs, tmp)
            report = out / name / "report"
            decisions, notes = _adaptive(b, name)
            write_report(spec, report, decisions)
            if f"experiments/{name}/report/validation.csv" in b.digests:
                write_validation(spec, report, method, url)
            if f"experiments/{name}/report/claims.csv" in b.digests:
                # the refusals' reasons as the workflow gave them from calibrations.json (stored with them)
                why = refusal_reasons(spec.sha256, url)
                write_claims(spec, report, method, url, extra_notes=notes, why_missing=why)


def _adaptive(b: Opened, name: str) -> tuple[dict[str, Any] | None, list[str]]:
    """An adaptive experiment's decisions as the bundle holds them (docs/adaptive.md), and the lines they
    add to claims.md; (None, []) for a fixed design."""
    rel = f"experiments/{name}/adaptive/decisions.json"
    if rel not in b.digests:
        return None, []
    from demuxlab.adaptive.text import decisions_notes

    doc = json.loads(b.read(rel))
    return doc, decisions_notes(doc)


def _compare(b: Opened, out: Path, max_rms: float) -> list[Check]:
    from demuxlab.bundle.compare import compare_bytes, compare_pixels, compare_table

    checks = []
    for exp in b.doc["experiments"]:
        name = exp["name"]
        prefix = f"experiments/{name}/report/"
        for rel in sorted(r for r in b.digests if r.startswith(prefix)):
            mine = out / name / "report" / rel[len(prefix) :]
            if not mine.is_file():
                checks.append(
                    Check(rel, "unchecked", "not regenerated (no generator for it in this demuxlab)")
                )
                continue
            bundled, regenerated = b.read(rel), mine.read_bytes()
            if rel.endswith(".csv"):
                v = compare_table(bundled, regenerated)
            elif rel.endswith(".png"):
                import matplotlib.image as mpimg

                v = compare_pixels(mpimg.imread(b.root / rel), mpimg.imread(mine), max_rms)
            else:
                v = compare_bytes(bundled, regenerated)
            checks.append(Check(rel, "ok" if v.ok else "differs", v.detail))
    return checks


def reproduce(path: Path, out: Path, max_rms: float, limits: Limits | None = None) -> list[Check]:
    """Regenerate every table and figure from the bundle's data alone (a private temporary PostgreSQL, no
    network) into ``out`` and compare each with the bundled one."""
    from demuxlab.db.embedded import Cluster
    from demuxlab.db.engine import dispose_engines

    with opened(path, limits=limits) as b:
        _require_ok(b)
        tmp = Path(tempfile.mkdtemp(prefix="dlx-repro-"))
        tmp.chmod(0o755)
        cluster = Cluster(
            tmp, settings={"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
        )
        try:
            cluster.ensure_running()
            url = cluster.url()
            _load_into(b, url)
            out.mkdir(parents=True, exist_ok=True)
            _regenerate(b, url, out, tmp)
            return _compare(b, out, max_rms)
        finally:
            dispose_engines()
            with contextlib.suppress(Exception):
                cluster.stop()
            shutil.rmtree(tmp, ignore_errors=True)


# -- rerun -------------------------------------------------------------------------------------------------

_NAME_LINE = re.compile(r"^name:[ \t]*['\"]?([a-z0-9-]+)['\"]?[ \t]*(#.*)?$", re.MULTILINE)


def rerun_spec_text(text: str, name: str, new_name: str, sha: str) -> str:
    """The spec with its name replaced (a new experiment), headed by where it came from."""
    if not re.fullmatch(r"[a-z0-9-]+", new_name):
        raise BundleError(f"rerun: experiment name {new_name!r} must match [a-z0-9-]+")
    m = _NAME_LINE.search(text)
    if m is None or m.group(1) != name:
        raise BundleError(f"rerun: spec of {name!r}: no top-level 'name: {name}' line to rename")
    body = text[: m.start()] + f"name: {new_name}" + text[m.end() :]
    return f"# rerun of experiment {name} (spec sha256 {sha}) from a demuxlab bundle\n{body}"


@dataclass
class RerunResult:
    experiments: list[tuple[str, str]]  # (new name, original name)
    workdir: Path
    url: str
    returncode: int


def rerun(
    path: Path,
    profile: str,
    workdir: Path,
    url: str,
    suffix: str = "rerun",
    limits: Limits | None = None,
) -> RerunResult:
    """Run the bundle's experiments again with its binaries and specs (new experiments, linked)."""
    workdir = workdir.resolve()
    extracted = workdir / "bundle"
    if extracted.exists():
        # Only ever remove an earlier extraction of a bundle, never a folder of the user's.
        if not (extracted / layout.MANIFEST).is_file() or not (extracted / layout.BUNDLE_JSON).is_file():
            raise BundleError(
                f"rerun: {extracted} exists and is not an extracted bundle; choose another --workdir"
            )
        shutil.rmtree(extracted)
    workdir.mkdir(parents=True, exist_ok=True)
    with opened(path, limits=limits, keep=extracted) as b:
        _require_ok(b)
        _load_into(b, url)  # the originals, to link to and to compare with
        pairs, cfg_path = _rerun_specs(b, workdir, suffix)
        for image in sorted(r for r in b.digests if r.startswith("images/")):
            loaded = subprocess.run(
                ["docker", "load", "-i", str(extracted / image)], capture_output=True, text=True
            )
            if loaded.returncode != 0:
                raise BundleError(
                    f"rerun: docker load {image}: {(loaded.stderr.strip() or 'failed').splitlines()[-1]}"
                )
        log = workdir / "snakemake.log"
        returncode = _run_workflow(profile, workdir, cfg_path, url, extracted / "binaries", log)
        _link_reruns(url, pairs)
        if returncode != 0:
            tail = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
            errors = [line for line in tail if "error" in line.lower()] or tail
            raise BundleError(
                f"rerun: the workflow (profile {profile}) failed (exit {returncode}): "
                f"{errors[-1].strip() if errors else 'no output'} (log: {log})"
            )
        return RerunResult([(p[0], p[2]) for p in pairs], workdir, url, returncode)


def _rerun_specs(b: Opened, workdir: Path, suffix: str) -> tuple[list[tuple[str, str, str, str]], Path]:
    """Each experiment's spec renamed ``<name>-<suffix>`` into ``workdir/specs`` and the workflow's config
    naming them (the bundle's launcher, run and model settings kept); returns (new name, new spec's
    SHA-256, name, SHA-256) per experiment and the config's path."""
    import yaml

    specs = workdir / "specs"
    specs.mkdir(exist_ok=True)
    pairs: list[tuple[str, str, str, str]] = []
    for exp in b.doc["experiments"]:
        name, sha = exp["name"], exp["spec_sha256"]
        new = f"{name}-{suffix}"
        new_text = rerun_spec_text(b.read(f"experiments/{name}/spec.yaml").decode(), name, new, sha)
        (specs / f"{new}.yaml").write_text(new_text)
        pairs.append((new, layout.sha256_hex(new_text.encode()), name, sha))
    cfg: dict[str, Any] = {}
    if "workflow/effective-config.json" in b.digests:
        effective = json.loads(b.read("workflow/effective-config.json"))
        cfg = {k: effective[k] for k in ("launcher", "run", "model") if k in effective}
    cfg.update({"experiments": [p[0] for p in pairs], "experiments_dir": str(specs)})
    cfg_path = workdir / "rerun-config.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=True))
    return pairs, cfg_path


def _run_workflow(profile: str, workdir: Path, cfg_path: Path, url: str, binaries: Path, log: Path) -> int:
    """Snakemake's ``all`` in ``workdir/work`` with the bundle's binaries, output in ``log``."""
    from demuxlab import paths

    wf = paths.repo_root() / "workflows"
    # A --configfile replaces the profile's own (the cluster profile's workflow.yaml names the cluster
    # and its inventory): name it first, so the rerun's settings add to it instead.
    own = wf / profile / "workflow.yaml"
    cmd = [
        str(Path(sys.executable).with_name("snakemake")),
        "all",
        "--snakefile", str(wf / "Snakefile"),
        "--profile", str(wf / profile),
        "--directory", str(workdir / "work"),
        "--configfile", *([str(own)] if own.is_file() else []), str(cfg_path),
    ]  # fmt: skip
    env = {**os.environ, "DEMUXLAB_DATABASE_URL": url, "DEMUXLAB_BIN": str(binaries)}
    with log.open("w") as log_file:
        proc = subprocess.run(cmd, stdout=log_file, stderr=subprocess.STDOUT, env=env, check=False)
    return proc.returncode


def _link_reruns(url: str, pairs: Sequence[tuple[str, str, str, str]]) -> None:
    """Each rerun experiment's ``rerun_of_id``: the original's id."""
    from demuxlab.bundle.dump import table
    from demuxlab.db.engine import get_engine

    engine = get_engine(url)
    e = table("experiments")
    with engine.begin() as conn:
        for new, new_sha, name, sha in pairs:
            conn.execute(
                e.update()
                .where(e.c.name == new, e.c.spec_sha256 == new_sha)
                .values(rerun_of_id=_experiment_id(conn, name, sha))
            )


def _experiment_id(conn: Any, name: str, sha: str) -> int | None:
    from sqlalchemy import select

    from demuxlab.bundle.dump import table

    e = table("experiments")
    found = conn.scalar(select(e.c.id).where(e.c.name == name, e.c.spec_sha256 == sha))
    return int(found) if found is not None else None
