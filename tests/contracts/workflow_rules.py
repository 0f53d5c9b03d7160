"""Load the Snakemake workflow the way a profile would and print its rules as JSON.

    python workflow_rules.py SNAKEFILE WORKDIR CONFIG_JSON CONFIGFILES_JSON CORES

Run in a subprocess by tests/contracts/test_style_snakemake.py, so that Snakemake's logging set-up and the
workflow's own module state stay out of the test process. It uses Snakemake's own parser
(`WorkflowApi._workflow`, the parsed workflow before any DAG is built), so the rules are what Snakemake
sees, whichever files the config's `host_pair` includes.
"""

from __future__ import annotations

import contextlib
import dis
import io
import json
import sys
from pathlib import Path
from typing import Any

from snakemake.api import ConfigSettings, OutputSettings, ResourceSettings, SnakemakeApi, StorageSettings


def text(item: Any) -> str | None:
    return None if callable(item) else str(item)


def loads_log(function: Any) -> bool:
    """Whether a `run:` block's code reads `log` (Snakemake passes every run block a `log` argument)."""
    return any(i.opname.startswith("LOAD") and i.argval == "log" for i in dis.get_instructions(function))


def rule_doc(rule: Any, default_target: str | None) -> dict[str, Any]:
    functions = [x for x in rule.input if callable(x) and hasattr(x, "__code__")]
    return {
        "name": rule.name,
        "norun": bool(rule.norun),
        "run": bool(rule.is_run),
        "run_reads_log": bool(rule.is_run) and loads_log(rule.run_func),
        "shell": rule.shellcmd,
        "log": [text(x) for x in rule.log],
        "output": [text(x) for x in rule.output],
        "input_functions": [[f.__name__, f.__code__.co_filename] for f in functions],
        "input_literals": [text(x) for x in rule.input if not callable(x)],
        "default_target": default_target == rule.name,
    }


def main() -> None:
    snakefile, workdir, config_json, configfiles_json, cores = sys.argv[1:6]
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured), SnakemakeApi(OutputSettings()) as api:
        workflow_api = api.workflow(
            resource_settings=ResourceSettings(cores=int(cores), nodes=1),
            config_settings=ConfigSettings(
                config=json.loads(config_json), configfiles=[Path(p) for p in json.loads(configfiles_json)]
            ),
            storage_settings=StorageSettings(),
            snakefile=Path(snakefile),
            workdir=Path(workdir),
        )
        workflow = workflow_api._workflow
        rules = [rule_doc(rule, workflow.default_target) for rule in workflow.rules]
    print(json.dumps({"rules": rules}))


if __name__ == "__main__":
    main()
