"""The workflow's structure, without running an experiment: the config schema describes and defaults every
key, parsing reads and validates only (no demuxlab import, no binary run), the checkpoints are where the DAG
grows, and `snakemake --lint` has nothing to say."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from snakemake.utils import validate

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO / "workflows"
SCHEMA = WORKFLOWS / "schemas" / "config.schema.yaml"

pytestmark = [pytest.mark.timeout(300)]


def properties(schema: dict[str, Any], prefix: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = []
    for key, sub in schema.get("properties", {}).items():
        found.append((prefix + key, sub))
        found += properties(sub, f"{prefix}{key}.")
    return found


def test_schema_describes_and_defaults_every_key() -> None:
    schema = yaml.safe_load(SCHEMA.read_text())
    keys = properties(schema)
    assert len(keys) > 10
    for key, sub in keys:
        assert sub.get("description"), f"{key}: no description"
        assert "default" in sub, f"{key}: no default"
        if sub.get("type") == "object":
            assert sub.get("additionalProperties") is False, f"{key}: unknown keys would pass"


def test_schema_defaults_are_the_shipped_config() -> None:
    """Validating a config that names only the experiments fills in config/config.yaml, key for key."""
    shipped = yaml.safe_load((WORKFLOWS / "config" / "config.yaml").read_text())
    config: dict[str, Any] = {"experiments": shipped["experiments"]}
    validate(config, str(SCHEMA))
    assert config == shipped


def snakemake(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # -X importtime: every module imported while parsing and building the DAG, on stderr.
    cmd = [sys.executable, "-X", "importtime", "-m", "snakemake", *args]
    return subprocess.run(
        cmd, cwd=WORKFLOWS, capture_output=True, text=True, timeout=240, env=env, check=False
    )


def imported_demuxlab(stderr: str) -> list[str]:
    return re.findall(r"^import time:.*\|\s+(demuxlab\S*)$", stderr, re.M)


def job_counts(stdout: str) -> dict[str, int]:
    table = stdout[stdout.index("Job stats:") :]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M) if m[1] != "total"}


def test_parse_reads_only_and_the_plan_grows_the_dag(tmp_path: Path) -> None:
    """A dry run in a fresh folder imports no demuxlab module (so runs no `demux-server --list`, reads no
    spec through the package): it builds, then plans; the runs come after the plan checkpoint."""
    res = snakemake("--profile", "local", "-n", "all", "--directory", str(tmp_path))
    assert res.returncode == 0, res.stderr[-3000:]
    assert imported_demuxlab(res.stderr) == []
    assert "import time:" in res.stderr  # the check above saw the imports
    assert job_counts(res.stdout) == {"build_binaries": 1, "plan": 1, "all": 1}
    assert "checkpoint jobs" in res.stdout


def test_cluster_parse_reads_only(tmp_path: Path) -> None:
    """The cluster profile reads its inventory's pairs through a checkpoint too."""
    inventory = tmp_path / "cluster.yaml"
    inventory.write_text("simulated: {pairs: 3}\n")
    env = {**os.environ, "DEMUXLAB_INVENTORY": str(inventory)}
    res = snakemake("--profile", "cluster", "-n", "all", "--directory", str(tmp_path / "work"), env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert imported_demuxlab(res.stderr) == []
    assert job_counts(res.stdout) == {"build_binaries": 1, "plan": 1, "all": 1}


def test_cluster_profile_without_inventory_is_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DEMUXLAB_INVENTORY"}
    res = snakemake(
        "--profile", "cluster", "-n", "all", "--directory", str(tmp_path), "--config", "inventory=nowhere",
        env=env,
    )  # fmt: skip
    assert res.returncode != 0
    out = res.stdout + res.stderr  # Snakemake prints a parse error on stdout
    assert f"demuxlab: error: {REPO / 'nowhere'}: inventory not found" in out
    assert "Traceback" not in out


def test_unknown_experiment_is_one_line(tmp_path: Path) -> None:
    res = snakemake(
        "--profile", "local", "-n", "all", "--directory", str(tmp_path), "--config", "experiments=[nope]"
    )
    assert res.returncode != 0
    out = res.stdout + res.stderr
    assert "demuxlab: error: config: experiments: 'nope':" in out and "nope.yaml not found" in out
    assert "Traceback" not in out


def test_lint_is_clean() -> None:
    res = subprocess.run(
        [str(Path(sys.executable).with_name("snakemake")), "--lint"],
        cwd=WORKFLOWS,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert res.returncode == 0, res.stdout[-3000:]
    assert "Congratulations, your workflow is in a good condition!" in res.stdout + res.stderr


# The one rule that is not a command, and the function it calls (docs/ARCHITECTURE.md, "The rules are
# thin": a process per run would cost about a hundred times the CPU of the ingest itself).
IN_CONTROLLER = {"ingest_run": "ingest_in_controller"}
PACKAGE_IMPORT = re.compile(r"^\s*(from demuxlab\b|import demuxlab\b|import yaml\b|from yaml\b)")


def rules_of(profile: str, tmp_path: Path) -> list[dict[str, Any]]:
    """Every rule as the profile includes them, read by Snakemake's own parser (tests/contracts/)."""
    dump = REPO / "tests" / "contracts" / "workflow_rules.py"
    doc = yaml.safe_load((WORKFLOWS / profile / "config.yaml").read_text()) or {}
    named = doc.get("configfile") or doc.get("configfiles") or []
    files = [str(WORKFLOWS / f) for f in ([named] if isinstance(named, str) else named)]
    inventory = tmp_path / "simulated.yaml"
    inventory.write_text("simulated: {pairs: 2}\n")
    env = {**os.environ, "DEMUXLAB_INVENTORY": str(inventory)}
    snakefile = str(WORKFLOWS / "Snakefile")
    cmd = [sys.executable, str(dump), snakefile, str(tmp_path), "{}", json.dumps(files), "2"]
    res = subprocess.run(
        cmd, cwd=WORKFLOWS, capture_output=True, text=True, timeout=240, env=env, check=False
    )
    assert res.returncode == 0, res.stderr[-3000:]
    rules: list[dict[str, Any]] = json.loads(res.stdout.splitlines()[-1])["rules"]
    return rules


@pytest.mark.parametrize("profile", ["local", "cluster", "slurm"])
def test_rules_are_cli_calls(profile: str, tmp_path: Path) -> None:
    """Every rule that runs something is a shell command of `demuxlab` (`{params.cli}`) or of the run jobs'
    `demuxlab-run` (`{params.run}`), but the named exception, which alone is a `run:` block."""
    rules = rules_of(profile, tmp_path)
    assert {"plan", "run_point", "ingest_run"} <= {r["name"] for r in rules}
    for rule in rules:
        if rule["norun"]:
            continue
        if rule["name"] in IN_CONTROLLER:
            assert rule["run"], (
                f"{rule['name']}: the named exception is no longer a run: block (update the list)"
            )
            continue
        assert not rule["run"], f"{profile}: rule {rule['name']}: a run: block, not a demuxlab command"
        assert re.search(r"\{params\.(cli|run)\} ", rule["shell"] or ""), f"{rule['name']}: {rule['shell']}"


def test_rule_files_import_nothing_of_the_package() -> None:
    """No rule file imports demuxlab (or PyYAML for it) but in the named exception's function: what a rule
    or an input function needs of the package it asks a `demuxlab` command for."""
    found = []
    for path in sorted((WORKFLOWS / "rules").rglob("*.smk")):
        function = None
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.match(r"^(def (\w+)|\S)", line):
                m = re.match(r"^def (\w+)", line)
                function = m[1] if m else None
            if PACKAGE_IMPORT.match(line) and function not in IN_CONTROLLER.values():
                found.append(f"{path.relative_to(WORKFLOWS)}:{number}: {line.strip()}")
    assert found == []
