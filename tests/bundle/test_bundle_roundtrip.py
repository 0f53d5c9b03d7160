"""Bundles for real: a small experiment (specs/paper.yaml) through the workflow (its `bundle` target), then
create again, verify, tamper, import into fresh databases, reproduce the figures, rerun with the local
profile.

One workflow run (module fixture, ~1 min) serves every test; the CLI is run as a user would run it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from demuxlab.bundle import dump, layout
from demuxlab.bundle.archive import Entry, extract, write_archive
from helpers.load import Span, measured_wake, settle

REPO = Path(__file__).resolve().parents[2]
SPECS = Path(__file__).with_name("specs")
BIN = Path(sys.executable).parent
EXP = "paper"
NAME = f"{EXP}.bundle.tar.zst"
RUNS = 4  # 2 points + 2 calibration runs (every pattern has a model, so each is calibrated)

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(600)]


@dataclass(frozen=True)
class Produced:
    url: str
    work: Path
    bundle: Path
    sha: str
    span: Span  # the workflow's run: how busy the host was meanwhile


def cli(*args: str, url: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if url:
        env["DEMUXLAB_DATABASE_URL"] = url
    return subprocess.run(
        [str(BIN / "demuxlab"), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=400,
        check=False,
    )


@pytest.fixture(scope="module")
def produced(pg_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Produced]:
    name = f"test_bundle_{uuid.uuid4().hex[:10]}"
    url = pg_server.create_database(name, pg_server.template)
    work = tmp_path_factory.mktemp("bundle-work")
    try:
        with Span() as span:
            res = subprocess.run(
                [
                    str(BIN / "snakemake"),
                    f"results/{EXP}/{NAME}",
                    "--snakefile",
                    str(REPO / "workflows" / "Snakefile"),
                    "--profile",
                    str(REPO / "workflows" / "local"),
                    "--directory",
                    str(work),
                    "--config",
                    f"experiments=[{EXP}]",
                    f"experiments_dir={SPECS}",
                ],
                capture_output=True,
                text=True,
                env={**os.environ, "DEMUXLAB_DATABASE_URL": url},
                timeout=500,
                check=False,
            )
        assert res.returncode == 0, res.stderr[-3000:]
        sha = layout.sha256_hex((SPECS / f"{EXP}.yaml").read_bytes())
        yield Produced(url, work, work / "results" / EXP / NAME, sha, span)
    finally:
        pg_server.drop_database(name)


def rows_of(url: str, sha: str) -> dict[str, list[dict[str, Any]]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return dump.collect(conn, [(EXP, sha)])
    finally:
        engine.dispose()


def test_bundle_is_deterministic_complete_and_verifies(produced: Produced, tmp_path: Path) -> None:
    again = tmp_path / NAME
    res = cli(
        "bundle", "create", EXP, "--workdir", str(produced.work), "--experiments-dir", str(SPECS),
        "--out", str(again), url=produced.url,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert f"{RUNS} runs" in res.stdout
    # The workflow target also passed its configuration; otherwise the same inputs: compare without it.
    a, b = extract(produced.bundle, tmp_path / "a"), extract(again, tmp_path / "b")
    differing = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
    assert differing == {"workflow/effective-config.json", layout.MANIFEST, layout.CRATE}
    third = tmp_path / "third" / NAME
    assert cli(
        "bundle", "create", EXP, "--workdir", str(produced.work), "--experiments-dir", str(SPECS),
        "--out", str(third), url=produced.url,
    ).returncode == 0  # fmt: skip
    assert third.read_bytes() == again.read_bytes()  # created twice: the same bytes

    root = tmp_path / "a"
    for rel in (
        f"experiments/{EXP}/spec.yaml", f"experiments/{EXP}/plan.json", f"experiments/{EXP}/pinning.json",
        f"experiments/{EXP}/report/points.csv", f"experiments/{EXP}/report/throughput_vs_threads.png",
        f"experiments/{EXP}/report/validation.csv", f"experiments/{EXP}/model/predictions.json",
        "db/samples.parquet", "db/op_timings.parquet", "db/runs.parquet", "binaries/demux-server",
        "source/demuxlab-source.tar", "environment/lock.json", "README.md", "workflow/effective-config.json",
    ):  # fmt: skip
        assert (root / rel).is_file(), rel
    assert len(list((root / f"experiments/{EXP}/runs").glob("*.json"))) == RUNS
    # wake-cost travels with the binaries (a rerun measures the client's wake-up with it); it was used where
    # a run's pinning has its ω.
    bins = json.loads((root / "binaries" / "binaries.json").read_text())
    pinnings = [
        json.loads(f.read_text()).get("pinning") or {}
        for f in (root / f"experiments/{EXP}/runs").glob("*.json")
    ]
    woke = any("wake_us" in p for p in pinnings)  # settled at the end (a busy host can time wake-cost out)
    assert (root / "binaries" / "wake-cost").is_file() and bins["wake-cost"]["used_by_runs"] is woke
    assert layout.sha256_hex((root / f"experiments/{EXP}/spec.yaml").read_bytes()) == produced.sha
    assert f"demuxlab bundle reproduce {NAME}" in (root / "README.md").read_text()

    res = cli("bundle", "verify", str(produced.bundle))
    assert res.returncode == 0 and "ok:" in res.stdout, res.stderr
    settle(produced.span, measured_wake(pinnings))


def test_tampered_missing_and_extra_files_fail_verify(produced: Produced, tmp_path: Path) -> None:
    root = tmp_path / "x"
    digests = extract(produced.bundle, root)
    files = {rel: Entry(data=(root / rel).read_bytes()) for rel in digests}
    csv = bytearray(files[f"experiments/{EXP}/report/points.csv"].data or b"")
    csv[-2] = ord("7") if csv[-2] != ord("7") else ord("8")
    files[f"experiments/{EXP}/report/points.csv"] = Entry(data=bytes(csv))
    run = sorted(r for r in files if r.startswith(f"experiments/{EXP}/runs/"))[0]
    del files[run]
    files[f"experiments/{EXP}/report/extra.png"] = Entry(data=b"\x89PNG")
    bad = tmp_path / "bad.tar.gz"
    write_archive(bad, files)
    res = cli("bundle", "verify", str(bad))
    assert res.returncode == 1
    assert f"tampered: experiments/{EXP}/report/points.csv" in res.stderr
    assert f"missing: {run}" in res.stderr
    assert f"extra (not in MANIFEST.sha256): experiments/{EXP}/report/extra.png" in res.stderr
    assert "Traceback" not in res.stderr
    # A bundle that does not verify is neither imported nor reproduced.
    res = cli("bundle", "reproduce", str(bad), "--out", str(tmp_path / "r"))
    assert res.returncode != 0 and "does not verify" in res.stderr


def test_import_into_a_second_database_gives_the_same_rows(produced: Produced, fresh_url: str) -> None:
    original = rows_of(produced.url, produced.sha)
    assert len(original["runs"]) == RUNS and len(original["samples"]) >= RUNS
    # A calibration may be refused on 2 cores (the self-check); the paper-rate predictions remain.
    assert original["predictions"] and original["op_timings"]
    for _ in range(2):  # twice = once
        res = cli("bundle", "import", str(produced.bundle), "--database", fresh_url)
        assert res.returncode == 0, res.stderr
        assert f"imported {EXP}" in res.stdout and f"{RUNS} runs" in res.stdout
        assert rows_of(fresh_url, produced.sha) == original
    engine = sa.create_engine(fresh_url)
    try:
        with engine.begin() as conn:
            assert (
                conn.execute(sa.text("SELECT count(*) FROM runs_history")).scalar() == 0
            )  # nothing replaced
            # A stored run that differs from the bundle's (issue 23): the import replaces it, keeping it.
            changed = conn.execute(
                sa.text("UPDATE runs SET throughput_msgs_per_s = 1.0 WHERE run_id = :id RETURNING run_id"),
                {"id": original["runs"][0]["run_id"]},
            ).scalar_one()
        res = cli("bundle", "import", str(produced.bundle), "--database", fresh_url)
        assert res.returncode == 0, res.stderr
        assert "1 stored runs differed and were replaced, kept in runs_history" in res.stdout
        assert rows_of(fresh_url, produced.sha) == original
        with engine.connect() as conn:
            kept = conn.execute(sa.text("SELECT run_id, run, replaced_by FROM runs_history")).one()
    finally:
        engine.dispose()
    assert (str(kept.run_id), kept.run["throughput_msgs_per_s"]) == (str(changed), 1.0)
    assert kept.replaced_by == "bundle import"


def test_import_leaves_other_experiments_alone(produced: Produced, fresh_url: str) -> None:
    engine = sa.create_engine(fresh_url)
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.text("INSERT INTO experiments (name, spec_sha256) VALUES ('other', repeat('0', 64))")
            )
        res = cli("bundle", "import", str(produced.bundle), "--database", fresh_url)
        assert res.returncode == 0, res.stderr
        with engine.connect() as conn:
            exps = conn.execute(sa.text("SELECT id, name FROM experiments ORDER BY id")).all()
            runs = conn.execute(sa.text("SELECT count(*) FROM runs")).scalar()
    finally:
        engine.dispose()
    assert [tuple(e) for e in exps] == [(1, "other"), (2, EXP)]  # the bundle's id 1 was taken: mapped
    assert runs == RUNS
    imported = rows_of(fresh_url, produced.sha)
    original = rows_of(produced.url, produced.sha)
    assert {r["run_id"] for r in imported["runs"]} == {r["run_id"] for r in original["runs"]}
    assert {r["point_id"] for r in imported["runs"]} <= {p["id"] for p in imported["points"]}


def test_reproduce_regenerates_every_figure_and_table(produced: Produced, tmp_path: Path) -> None:
    out = tmp_path / "regen"
    res = cli("bundle", "reproduce", str(produced.bundle), "--out", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
    lines = [line for line in res.stdout.splitlines() if line.startswith(("ok", "differs", "unchecked"))]
    assert {line.split()[1].rstrip(":") for line in lines} == {
        f"experiments/{EXP}/report/{f}"
        for f in (
            "checks.csv",
            "claims.csv",
            "claims.html",
            "claims.md",
            "recommendations.csv",
            "points.csv",
            "points.html",
            "throughput_vs_threads.png",
            "validation.csv",
            "validation.html",
            "validation.png",
            "validation_summary.csv",
        )
    }
    assert all(line.startswith("ok") for line in lines), lines
    assert "identical pixel by pixel" in res.stdout
    assert (out / EXP / "report" / "throughput_vs_threads.png").is_file()


def test_planted_secret_refuses_the_bundle(produced: Produced, tmp_path: Path) -> None:
    leak = produced.work / "results" / EXP / "report" / "deploy_key.pem"
    leak.write_text("-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\n")
    out = tmp_path / NAME
    try:
        res = cli(
            "bundle", "create", EXP, "--workdir", str(produced.work), "--experiments-dir", str(SPECS),
            "--out", str(out), url=produced.url,
        )  # fmt: skip
    finally:
        leak.unlink()
    assert res.returncode == 1
    assert (
        f"bundle refused: secrets found: experiments/{EXP}/report/deploy_key.pem:1: private key" in res.stderr
    )
    assert not out.exists() and not list(tmp_path.iterdir())


def test_rerun_with_the_local_profile_is_a_linked_new_experiment(
    produced: Produced, fresh_url: str, tmp_path: Path
) -> None:
    rr = str(tmp_path / "rr")
    res = cli(
        "bundle",
        "rerun",
        str(produced.bundle),
        "--profile",
        "local",
        "--workdir",
        rr,
        "--database",
        fresh_url,
    )
    assert res.returncode == 0, res.stderr
    engine = sa.create_engine(fresh_url)
    try:
        with engine.connect() as conn:
            exps = {r.name: r for r in conn.execute(sa.text("SELECT id, name, rerun_of_id FROM experiments"))}
            runs = conn.execute(
                sa.text(
                    "SELECT e.name, r.status, r.server_artifact->>'sha256' AS sha FROM runs r "
                    "JOIN points p ON p.id = r.point_id JOIN experiments e ON e.id = p.experiment_id"
                )
            ).all()
    finally:
        engine.dispose()
    assert exps[f"{EXP}-rerun"].rerun_of_id == exps[EXP].id
    rerun_runs = [r for r in runs if r.name == f"{EXP}-rerun"]
    assert len(rerun_runs) == RUNS and all(r.status == "ok" for r in rerun_runs)
    # The rerun ran the bundle's own server binary.
    assert {r.sha for r in rerun_runs} == {extract(produced.bundle, tmp_path / "x")["binaries/demux-server"]}
    assert (tmp_path / "rr" / "work" / "results" / f"{EXP}-rerun" / "report" / "points.csv").is_file()


def test_cluster_profile_error_speaks(
    produced: Produced, fresh_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The cluster profile runs on the inventory's pairs; one that does not exist is named in one line.
    monkeypatch.setenv("DEMUXLAB_INVENTORY", str(tmp_path / "no-such-inventory"))
    rc = str(tmp_path / "rc")
    res = cli(
        "bundle",
        "rerun",
        str(produced.bundle),
        "--profile",
        "cluster",
        "--workdir",
        rc,
        "--database",
        fresh_url,
    )
    assert res.returncode == 1
    assert res.stderr.startswith("demuxlab: error: rerun: the workflow (profile cluster) failed")
    assert "Traceback" not in res.stderr.splitlines()[0]


def rebuilt(src: Path, tmp: Path, change: dict[str, bytes]) -> Path:
    """The bundle with files replaced, its manifest and crate made consistent again (as an attacker would)."""
    root = tmp / "orig"
    digests = extract(src, root)
    files = {rel: (root / rel).read_bytes() for rel in digests if rel not in (layout.MANIFEST, layout.CRATE)}
    files.update(change)
    sums = {rel: layout.sha256_hex(data) for rel, data in files.items()}
    crate = layout.make_crate(files, sums, name="x", description="x", date_published="2026-01-01")
    files[layout.CRATE] = layout.canonical_json(crate)
    sums[layout.CRATE] = layout.sha256_hex(files[layout.CRATE])
    files[layout.MANIFEST] = layout.make_manifest(sums)
    out = tmp / "evil.tar.gz"
    write_archive(out, {rel: Entry(data=data) for rel, data in files.items()})
    return out


def test_a_consistent_but_bad_dump_is_refused_and_writes_nothing(
    produced: Produced, fresh_url: str, tmp_path: Path
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from demuxlab.bundle.archive import BundleError
    from demuxlab.bundle.ops import import_bundle

    root = tmp_path / "x"
    extract(produced.bundle, root)
    runs = pq.read_table(root / "db" / "runs.parquet")

    def parquet(table: Any) -> bytes:
        buf = pa.BufferOutputStream()
        pq.write_table(table, buf)
        return bytes(buf.getvalue().to_pybytes())

    retyped = runs.set_column(
        runs.column_names.index("attempt"), "attempt", pa.array(["one"] * runs.num_rows, pa.string())
    )
    dangling = runs.set_column(
        runs.column_names.index("point_id"), "point_id", pa.array([999] * runs.num_rows, pa.int32())
    )
    for i, (table, message) in enumerate(
        [(retyped, "column 'attempt' is string, expected int32"), (dangling, "does not load")]
    ):
        bad = rebuilt(produced.bundle, tmp_path / str(i), {"db/runs.parquet": parquet(table)})
        assert cli("bundle", "verify", str(bad)).returncode == 0  # consistent: only loading can tell
        with pytest.raises(BundleError, match=message):
            import_bundle(bad, fresh_url)
        assert rows_of(fresh_url, produced.sha)["experiments"] == []  # one transaction: nothing written


def test_import_defaults_to_an_embedded_database_at_a_chosen_place(produced: Produced) -> None:
    import shutil
    import tempfile

    from demuxlab.db.embedded import Cluster

    home = Path(tempfile.mkdtemp(prefix="dlx-imp-"))  # short: the socket path must fit in 107 bytes
    home.chmod(0o755)
    cluster = Cluster(home)
    try:
        env_free = {k: v for k, v in os.environ.items() if k != "DEMUXLAB_DATABASE_URL"}
        res = subprocess.run(
            [str(BIN / "demuxlab"), "bundle", "import", str(produced.bundle), "--home", str(home)],
            capture_output=True,
            text=True,
            env=env_free,
            timeout=300,
            check=False,
        )
        assert res.returncode == 0, res.stderr
        assert cluster.url() in res.stdout
        assert len(rows_of(cluster.url(), produced.sha)["runs"]) == RUNS
    finally:
        cluster.stop()
        shutil.rmtree(home, ignore_errors=True)
