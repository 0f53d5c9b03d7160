"""STYLE.md's Snakemake examples (snakemake-workflows' template and rna-seq-star-deseq2) as contracts on
workflows/.

Already enforced elsewhere, and not repeated here: the schema's every key has a `description` and a
`default`, and parsing imports no demuxlab module (tests/integration/test_workflow_structure.py), `--lint` of
the default configuration (`make lint`, and that module's test_lint_is_clean), a real run on a tiny config
(tests/integration/test_workflow.py). This module adds the rest, for every profile: the rules are read
with Snakemake's own parser (workflow_rules.py, in a subprocess), so a rule included only by the cluster
profile is checked as well as one of the local profile.
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import subprocess
import sys
import tokenize
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO / "workflows"
SNAKEFILE = WORKFLOWS / "Snakefile"
RULE_FILES = sorted((WORKFLOWS / "rules").rglob("*.smk"))
DUMP = Path(__file__).with_name("workflow_rules.py")
# Snakemake profiles: the folders of workflows/ with a config.yaml, but config/ (the workflow's config).
PROFILES = sorted(p.parent.name for p in WORKFLOWS.glob("*/config.yaml") if p.parent.name != "config")
# Top-level statements a table of contents may hold.
TOC_LINE = re.compile(
    r"^(#.*|import \w[\w.]*( as \w+)?|from [\w.]+ import [\w, ]+|min_version\(.*\)"
    r"|configfile: .+|report: .+|include: .+|rule all:)$"
)
STDERR_TO_LOG = re.compile(r"(2>>?|&>)\s*\{log(\.\w+)?\}|>\s*\{log(\.\w+)?\}\s*2>&1")


# One worker under pytest-xdist: the profiles' scratch folders under .demuxlab/contracts are shared, and
# rules_of's cache is per process.
pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.xdist_group("module:tests/contracts/test_style_snakemake.py"),
]


def profile_settings(profile: str) -> tuple[list[str], int]:
    """(workflow config files, cores) a profile hands Snakemake."""
    doc = yaml.safe_load((WORKFLOWS / profile / "config.yaml").read_text()) or {}
    files = doc.get("configfile") or doc.get("configfiles") or []
    files = [files] if isinstance(files, str) else files
    cores = doc.get("cores", 2)
    return [str(WORKFLOWS / f) for f in files], int(cores) if str(cores).isdigit() else 2


@cache
def rules_of(profile: str) -> list[dict[str, Any]]:
    """Every rule of the workflow as the profile's configuration includes them (workflow_rules.py)."""
    configfiles, cores = profile_settings(profile)
    scratch = REPO / ".demuxlab" / "contracts" / profile
    scratch.mkdir(parents=True, exist_ok=True)
    inventory = scratch / "simulated.yaml"
    inventory.write_text("simulated: {pairs: 2}\n")
    env = {**os.environ, "DEMUXLAB_INVENTORY": str(inventory)}
    cmd = [sys.executable, str(DUMP), str(SNAKEFILE), str(scratch), "{}", json.dumps(configfiles), str(cores)]
    res = subprocess.run(
        cmd, cwd=WORKFLOWS, capture_output=True, text=True, timeout=300, env=env, check=False
    )
    assert res.returncode == 0, f"profile {profile}: the workflow does not load:\n{res.stderr[-3000:]}"
    rules: list[dict[str, Any]] = json.loads(res.stdout.splitlines()[-1])["rules"]
    assert len(rules) >= 8, f"profile {profile}: {[r['name'] for r in rules]}"
    return rules


def test_profiles_found() -> None:
    """STYLE.md, Snakemake: "snakemake-workflows' template": the profiles the checks below load are found
    (an empty list would let every check pass)."""
    assert {"local", "cluster"} <= set(PROFILES)


# --- the Snakefile --------------------------------------------------------------------------------------


def test_snakefile_reads_as_a_table_of_contents() -> None:
    """STYLE.md, Snakemake: "The Snakefile reads as a table of contents: `configfile:`, `include:` of
    `rules/*.smk`, `rule all` (marked `default_target: True`), `min_version(...)`": every top-level line is
    one of those (or a comment, an import), and `rule all` holds only `default_target: True` and its input."""
    lines = SNAKEFILE.read_text().splitlines()
    top = [line for line in lines if line.strip() and not line[0].isspace()]
    other = [line for line in top if not TOC_LINE.match(line)]
    assert not other, f"Snakefile: not a table of contents: {other}"
    assert any(line.startswith("min_version(") for line in top), "Snakefile: no min_version(...)"
    assert any(line.startswith("configfile:") for line in top), "Snakefile: no configfile:"
    assert sum(line.startswith("include:") for line in top) >= 5
    start = lines.index("rule all:")
    block = []
    for line in lines[start + 1 :]:
        if line.strip() and not line[0].isspace():
            break
        block.append(line.strip())
    directives = [line.split(":")[0] for line in block if line and re.match(r"^\w+:", line)]
    assert directives == ["default_target", "input"], f"rule all: {directives}"
    assert "default_target: True" in block


def test_default_target_from_a_function() -> None:
    """STYLE.md, Snakemake: "Target lists come from a function in `common.smk`": `rule all` is the default
    target, runs nothing, and its input is a function of the rules/ files, evaluated when the DAG is built
    (not a list computed while the Snakefile is parsed)."""
    for profile in PROFILES:
        rules = {r["name"]: r for r in rules_of(profile)}
        assert rules["all"]["default_target"] and rules["all"]["norun"], f"{profile}: rule all"
        functions = rules["all"]["input_functions"]
        assert functions and not rules["all"]["input_literals"], (
            f"{profile}: rule all's input is not a function"
        )
        for name, filename in functions:
            assert Path(filename).parent.is_relative_to(WORKFLOWS / "rules"), (
                f"{name} is defined in {filename}"
            )


def first_statement(path: Path) -> str:
    """The first line of a file that is not a comment, an import, min_version, configfile or report."""
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or re.match(r"(import|from) ", stripped):
            continue
        if re.match(r"(min_version\(|configfile:|report:)", stripped):
            continue
        return stripped
    return ""


def test_config_validated_up_front() -> None:
    """STYLE.md, Snakemake: "Config is validated up front (`validate(config, schema=...)`)": the first thing
    the workflow does after reading its config is to validate it against the schema: in the Snakefile, or
    as the first statement of the first file it includes."""
    first = first_statement(SNAKEFILE)
    if first.startswith("include:"):
        included = WORKFLOWS / ast.literal_eval(first.split(":", 1)[1].strip())
        first = first_statement(included)
    assert re.match(r"validate\(config, (schema=)?[\"'][\w./]*config\.schema\.yaml[\"']\)$", first), (
        f"the workflow's first statement is {first!r}, not validate(config, ...)"
    )


def config_keys(path: Path) -> list[tuple[int, str]]:
    """(line, key) of every mapping key of a YAML config file written one per line."""
    lines = path.read_text().splitlines()
    return [(i, m[1]) for i, line in enumerate(lines) if (m := re.match(r"^\s*([A-Za-z_]\w*):", line))]


@pytest.mark.parametrize(
    "path",
    [WORKFLOWS / "config" / "config.yaml", *sorted(WORKFLOWS.glob("*/workflow.yaml"))],
    ids=lambda p: str(p.relative_to(WORKFLOWS)),
)
def test_config_file_explains_each_key(path: Path) -> None:
    """STYLE.md, Snakemake: "the config file explains each key in a comment": every key of the workflow's
    config files (config/config.yaml and each profile's workflow.yaml), sections included, has a comment
    of its own on the line above or at the end of its line."""
    lines = path.read_text().splitlines()
    keys = config_keys(path)
    assert keys
    bare = [
        key
        for i, key in keys
        if not (i > 0 and lines[i - 1].strip().startswith("#")) and " # " not in lines[i]
    ]
    assert not bare, f"{path.relative_to(REPO)}: keys without a comment: {bare}"


# --- every rule -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("profile", PROFILES)
def test_every_rule_logs_its_stderr(profile: str) -> None:
    """STYLE.md, Snakemake: "Every rule has `log:`; scripts send their stderr to that log first": each rule
    that runs something has a log under logs/, a shell command redirects its stderr there, and a `run:`
    block uses its log."""
    for rule in rules_of(profile):
        if rule["norun"]:
            continue
        name = rule["name"]
        assert rule["log"], f"{profile}: rule {name} has no log:"
        assert all(str(p).startswith("logs/") for p in rule["log"]), f"{profile}: {name}: log {rule['log']}"
        if rule["shell"] is not None:
            assert STDERR_TO_LOG.search(rule["shell"]), f"{profile}: {name}: stderr not sent to its log"
        if rule["run"]:
            assert rule["run_reads_log"], f"{profile}: {name}: its run: block never uses its log"


@pytest.mark.parametrize("profile", PROFILES)
def test_outputs_under_results(profile: str) -> None:
    """STYLE.md, Snakemake: "outputs land in `results/<stage>/...`": every output of every rule is under
    results/, at least two levels down (a stage or an experiment folder, then the file)."""
    for rule in rules_of(profile):
        for output in rule["output"]:
            assert output and re.match(r"results/[^/]+/.+", output), f"{profile}: {rule['name']}: {output}"


def normalized(path: str) -> str:
    """A path pattern with every wildcard (with or without its constraint) written `{}`."""
    out, depth = [], 0
    for char in path:
        if char == "{":
            if depth == 0:
                out.append("{}")
            depth += 1
        elif char == "}" and depth:
            depth -= 1
        elif depth == 0:
            out.append(char)
    return "".join(out)


def string_literals(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string literal of a Snakemake file, f-strings with `{}` for each field."""
    found = []
    for token in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if token.type != tokenize.STRING:
            continue
        node = ast.parse(token.string, mode="eval").body
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append((token.start[0], node.value))
        elif isinstance(node, ast.JoinedStr):
            parts = [v.value if isinstance(v, ast.Constant) else "{}" for v in node.values]
            found.append((token.start[0], "".join(str(p) for p in parts)))
    return found


def test_rules_reference_outputs_not_paths() -> None:
    """STYLE.md, Snakemake: "Rules reference each other's outputs (`rules.x.output.y`), never repeated path
    strings": an output's path is written once, in its rule; every other mention of that file, in a rule's
    input or an input function (a plain or an f-string), goes through `rules.x.output`. Paths assembled
    piece by piece are beyond this check."""
    outputs = {normalized(o) for profile in PROFILES for r in rules_of(profile) for o in r["output"]}
    assert len(outputs) >= 10
    written: dict[str, list[str]] = {}
    for path in [SNAKEFILE, *RULE_FILES]:
        for line, text in string_literals(path):
            if normalized(text) in outputs:
                written.setdefault(normalized(text), []).append(f"{path.relative_to(WORKFLOWS)}:{line}")
    repeated = {path: places for path, places in written.items() if len(places) > 1}
    assert not repeated, "output paths written more than once:\n" + "\n".join(
        f"  {path}: {', '.join(places)}" for path, places in sorted(repeated.items())
    )


def test_the_path_check_can_fail(tmp_path: Path) -> None:
    """STYLE.md, Snakemake: "Rules reference each other's outputs ..., never repeated path strings": the
    scan finds a path repeated as an f-string, with its wildcards renamed."""
    smk = tmp_path / "x.smk"
    smk.write_text(
        'rule a:\n    output:\n        "results/{experiment,[a-z]+}/runs/{run_id}.json",\n'
        'def f(wildcards):\n    return f"results/{wildcards.experiment}/runs/{rid}.json"\n'
    )
    texts = [normalized(t) for _, t in string_literals(smk)]
    assert texts.count("results/{}/runs/{}.json") == 2


@pytest.mark.parametrize("profile", [p for p in PROFILES if p != "local"])
def test_lint_clean_in_other_profiles(profile: str) -> None:
    """STYLE.md, Snakemake: "CI runs `--lint`": `make lint` lints the default configuration (the local
    profile's rules); the rules only another profile includes are linted here, with that profile."""
    scratch = REPO / ".demuxlab" / "contracts" / profile
    scratch.mkdir(parents=True, exist_ok=True)
    inventory = scratch / "simulated.yaml"
    inventory.write_text("simulated: {pairs: 2}\n")
    env = {**os.environ, "DEMUXLAB_INVENTORY": str(inventory)}
    snakemake = Path(sys.executable).with_name("snakemake")
    res = subprocess.run(
        [str(snakemake), "--lint", "--profile", profile, "--directory", str(scratch)],
        cwd=WORKFLOWS,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert "Congratulations, your workflow is in a good condition!" in out, out[-3000:]
