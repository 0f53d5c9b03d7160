"""STYLE.md's Ansible examples (geerlingguy's roles and the Ansible docs' tips) as contracts on playbooks/.

ansible-lint (profile `production`, in `make lint`) already enforces fully qualified module names, named
tasks and `changed_when` on commands; these tests add what it does not check. Task names that *state a
result* and check mode that *works* are not parsed here: the first needs a reader's judgement, the second
a real run (tests/cluster/test_playbooks.py::test_check_mode_runs_clean); docs/ARCHITECTURE.md, "Style
contracts", says so.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PLAYBOOKS = REPO / "playbooks"
ROLES = sorted(p for p in (PLAYBOOKS / "roles").iterdir() if p.is_dir())
README = PLAYBOOKS / "README.md"

# Commands that only look: they never change a host, so their tasks must say `changed_when: false`.
READ_ONLY_COMMANDS = (
    ("dpkg-query",),
    ("df",),
    ("stat",),
    ("cat",),
    ("test",),
    ("getconf",),
    ("nproc",),
    ("uname",),
    ("docker", "version"),
    ("docker", "info"),
    ("docker", "image", "inspect"),
    ("docker", "inspect"),
    ("docker", "ps"),
    ("systemctl", "is-active"),
    ("systemctl", "show"),
)
DISPATCH_MODULES = {"import_tasks", "include_tasks", "import_role", "include_role"}
RESTARTING_STATES = {"restarted", "reloaded"}


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def task_keywords() -> set[str]:
    from ansible.playbook.block import Block
    from ansible.playbook.task import Task

    return set(Task.fattributes) | set(Block.fattributes) | {"listen", "local_action"}


def walk_tasks(tasks: list[dict[str, Any]] | None) -> Iterator[dict[str, Any]]:
    """Every task of a task list, those inside block/rescue/always included (the blocks themselves not)."""
    for task in tasks or []:
        if "block" in task:
            for part in ("block", "rescue", "always"):
                yield from walk_tasks(task.get(part))
        else:
            yield task


def module_of(task: dict[str, Any]) -> tuple[str, Any]:
    """(module name, its arguments) of a task: the one key that is not a task keyword."""
    keywords = task_keywords()
    found = [k for k in task if k not in keywords and not k.startswith("with_")]
    assert len(found) == 1, f"task {task.get('name')!r}: cannot tell its module from {sorted(task)}"
    return found[0], task[found[0]]


def short(module: str) -> str:
    return module.rsplit(".", 1)[-1]


def task_files() -> list[Path]:
    files = sorted(PLAYBOOKS.glob("roles/*/tasks/*.yml")) + sorted(PLAYBOOKS.glob("roles/*/handlers/*.yml"))
    return files


def all_tasks() -> Iterator[tuple[Path, dict[str, Any]]]:
    """(file, task) for every task of every role and playbook."""
    for path in task_files():
        for task in walk_tasks(load(path)):
            yield path, task
    for path in sorted(PLAYBOOKS.glob("*.yml")):
        for play in load(path) or []:
            for part in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                for task in walk_tasks(play.get(part)):
                    yield path, task


def where(path: Path, task: dict[str, Any]) -> str:
    return f"{path.relative_to(REPO)}: {task.get('name')!r}"


def test_roles_exist() -> None:
    """STYLE.md, Ansible: "geerlingguy's roles": the roles and tasks the checks below read are found (an
    empty glob would let every check pass)."""
    assert {"docker_engine", "host_tuning", "host_facts", "images"} <= {r.name for r in ROLES}
    assert sum(1 for _ in all_tasks()) > 30


# --- defaults/main.yml ---------------------------------------------------------------------------------


def defaults_keys(role: Path) -> list[tuple[int, str]]:
    """(line number, key) of each top-level key of the role's defaults/main.yml."""
    lines = (role / "defaults" / "main.yml").read_text().splitlines()
    return [(i, m[1]) for i, line in enumerate(lines) if (m := re.match(r"^([A-Za-z_]\w*):", line))]


@pytest.mark.parametrize("role", ROLES, ids=lambda r: r.name)
def test_defaults_prefixed_with_the_role(role: Path) -> None:
    """STYLE.md, Ansible: "`defaults/main.yml` holds every user setting, each commented and prefixed with
    the role's name"; the prefix part: a role's variables cannot collide with another role's."""
    keys = [k for _, k in defaults_keys(role)]
    assert keys, f"{role.name}: defaults/main.yml sets nothing"
    assert sorted(keys) == sorted(load(role / "defaults" / "main.yml")), "keys by line and by YAML differ"
    wrong = [k for k in keys if not k.startswith(role.name + "_")]
    assert not wrong, f"{role.name}/defaults/main.yml: not prefixed with {role.name}_: {wrong}"


@pytest.mark.parametrize("role", ROLES, ids=lambda r: r.name)
def test_defaults_each_commented(role: Path) -> None:
    """STYLE.md, Ansible: "`defaults/main.yml` holds every user setting, each commented"; the comment part:
    each key has its own comment on the line above it (or at the end of its line), not one shared with the
    key before it."""
    lines = (role / "defaults" / "main.yml").read_text().splitlines()
    bare = [
        key
        for i, key in defaults_keys(role)
        if not (i > 0 and lines[i - 1].lstrip().startswith("#")) and " # " not in lines[i]
    ]
    assert not bare, f"{role.name}/defaults/main.yml: no comment of their own: {bare}"


def readme_role_tables() -> dict[str, dict[str, str]]:
    """{role: {variable: default as written}} from the README's table under each `### role` heading."""
    tables: dict[str, dict[str, str]] = {}
    role = None
    for line in README.read_text().splitlines():
        if m := re.match(r"^#{2,4} Role `(\w+)`", line):
            role = m[1]
            tables[role] = {}
        elif role and (m := re.match(r"^\| `(\w+)` \| `(.*?)` \|", line)):
            tables[role][m[1]] = m[2].replace("\\|", "|")  # a pipe inside a table cell is written \|
        elif line.startswith("#"):
            role = None
    return tables


@pytest.mark.parametrize("role", ROLES, ids=lambda r: r.name)
def test_readme_documents_every_variable_with_its_default(role: Path) -> None:
    """STYLE.md, Ansible: "the README documents every variable with its default": playbooks/README.md has
    a table per role whose rows are exactly the role's defaults, each default written as in
    defaults/main.yml (read back as YAML, so `true`, `[]` and `10m` compare as values)."""
    tables = readme_role_tables()
    assert role.name in tables, f"playbooks/README.md: no table under '### Role `{role.name}`'"
    documented = tables[role.name]
    defaults = load(role / "defaults" / "main.yml")
    assert sorted(documented) == sorted(defaults), f"README's {role.name} table vs defaults/main.yml"
    for key, written in documented.items():
        value = defaults[key]
        assert yaml.safe_load(written) == value, f"README: {key}: default `{written}`, not {value!r}"


# --- tasks ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ROLES, ids=lambda r: r.name)
def test_tasks_main_only_dispatches(role: Path) -> None:
    """STYLE.md, Ansible: "`tasks/main.yml` only dispatches (`include_tasks` per OS family)": a role's
    main.yml imports or includes task files and does nothing itself, so it reads as the role's contents."""
    tasks = load(role / "tasks" / "main.yml")
    assert tasks, f"{role.name}/tasks/main.yml is empty"
    doing = [t.get("name") for t in tasks if "block" in t or short(module_of(t)[0]) not in DISPATCH_MODULES]
    assert not doing, f"{role.name}/tasks/main.yml does work itself: {doing}"
    for task in tasks:
        module, arg = module_of(task)
        if short(module) in {"import_tasks", "include_tasks"}:
            name = arg if isinstance(arg, str) else arg.get("file")
            assert (role / "tasks" / name).is_file(), f"{role.name}/tasks/main.yml: {name} does not exist"


@cache
def modules_taking_state(modules: tuple[str, ...]) -> dict[str, str | None]:
    """{module: default of its `state` option} for the modules that have one, from `ansible-doc -j`."""
    doc = shutil.which("ansible-doc", path=str(Path(sys.executable).parent))
    assert doc, "ansible-doc not found beside the test's Python: run `make setup`"
    res = subprocess.run([doc, "-j", *modules], capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr
    docs = json.loads(res.stdout)
    assert sorted(docs) == sorted(modules), f"ansible-doc knows {sorted(docs)} of {modules}"
    return {
        name: d["doc"]["options"]["state"].get("default")
        for name, d in docs.items()
        if "state" in (d["doc"].get("options") or {})
    }


def test_state_always_explicit() -> None:
    """STYLE.md, Ansible: "`state:` always explicit": every task whose module has a `state` option (as
    `ansible-doc` reports it) sets it, rather than leaning on the module's default."""
    tasks = [(p, t, *module_of(t)) for p, t in all_tasks()]
    modules = tuple(sorted({m for *_, m, _ in tasks if m.startswith(("ansible.", "community."))}))
    taking = modules_taking_state(modules)
    assert {"ansible.builtin.file", "ansible.builtin.service"} <= set(taking)  # the lookup works
    implicit = [
        f"{where(p, t)} ({m}, default {taking[m]!r})"
        for p, t, m, args in tasks
        if m in taking and not (isinstance(args, dict) and "state" in args)
    ]
    assert not implicit, "tasks leaving `state` to the module's default:\n" + "\n".join(implicit)


def command_words(module: str, args: Any) -> list[str]:
    if isinstance(args, str):
        return args.split()
    if isinstance(args, dict):
        if "argv" in args:
            return [str(a) for a in args["argv"]]
        return str(args.get("cmd", "")).split()
    return []


def test_read_only_commands_change_nothing() -> None:
    """STYLE.md, Ansible: "read-only commands `changed_when: false`": a command that only looks (dpkg-query,
    df, `docker image inspect`, ...) never reports a change, so a second run of a play reads changed=0."""
    checked = 0
    wrong = []
    for path, task in all_tasks():
        module, args = module_of(task)
        if short(module) not in {"command", "shell", "raw"}:
            continue
        words = command_words(module, args)
        if any(tuple(words[: len(ro)]) == ro for ro in READ_ONLY_COMMANDS):
            checked += 1
            if task.get("changed_when") is not False:
                wrong.append(where(path, task))
    assert checked >= 3, "the read-only commands were not recognised"
    assert not wrong, "read-only commands without `changed_when: false`: " + ", ".join(wrong)


def test_restarts_go_through_handlers() -> None:
    """STYLE.md, Ansible: "restarts go through handlers": no task restarts or reloads a service itself; it
    notifies a handler, so a service restarts once per play, and only when something changed."""
    wrong = []
    for path, task in all_tasks():
        if "/handlers/" in str(path):
            continue
        module, args = module_of(task)
        words = command_words(module, args)
        if (isinstance(args, dict) and args.get("state") in RESTARTING_STATES) or (
            short(module) in {"command", "shell"} and {"restart", "reload"} & set(words)
        ):
            wrong.append(where(path, task))
    assert not wrong, "tasks restarting a service outside handlers: " + ", ".join(wrong)
    handler_files = PLAYBOOKS.glob("roles/*/handlers/main.yml")
    handlers = [module_of(t)[1] for p in handler_files for t in walk_tasks(load(p))]
    assert any(isinstance(args, dict) and args.get("state") == "restarted" for args in handlers)


def test_notified_handlers_exist() -> None:
    """STYLE.md, Ansible: "restarts go through handlers": every `notify:` names a handler of the same role
    (a misspelt one would make Ansible fail only when the task changes something)."""
    for role in ROLES:
        handlers_file = role / "handlers" / "main.yml"
        handlers = {t.get("name") for t in walk_tasks(load(handlers_file) if handlers_file.exists() else [])}
        for path in sorted((role / "tasks").glob("*.yml")):
            for task in walk_tasks(load(path)):
                notify = task.get("notify", [])
                for name in [notify] if isinstance(notify, str) else notify:
                    assert name in handlers, f"{where(path, task)}: notifies {name!r}: no such handler"


# --- playbooks and inventories ---------------------------------------------------------------------------


def test_site_imports_one_playbook_per_tier() -> None:
    """STYLE.md, Ansible: "`site.yml` imports one playbook per tier": site.yml only imports playbooks, and
    each imported playbook is one play applying one role."""
    site = load(PLAYBOOKS / "site.yml")
    assert site, "site.yml is empty"
    for entry in site:
        module, name = module_of(entry)
        assert short(module) == "import_playbook", f"site.yml: {entry.get('name')!r} imports no playbook"
        plays = load(PLAYBOOKS / name)
        assert len(plays) == 1, f"{name}: {len(plays)} plays, not one tier"
        roles = plays[0].get("roles", [])
        assert len(roles) == 1 and not plays[0].get("tasks"), f"{name}: applies {roles}, not one role"


def test_inventories_keep_role_settings_in_group_vars() -> None:
    """STYLE.md, Ansible: "One inventory per environment with `group_vars/`": each shipped inventory is a
    folder (hosts.yml beside its group_vars/), and the roles' settings live in group_vars/ or host_vars/,
    never inline in hosts.yml where they would hide among the hosts."""
    # inventories/testbed/ is generated by `make testbed` (not in git).
    shipped = sorted((PLAYBOOKS / "inventories").iterdir())
    inventories = [p for p in shipped if p.is_dir() and p.name != "testbed"]
    assert len(inventories) >= 2
    prefixes = tuple(role.name + "_" for role in ROLES)

    def inline_vars(node: Any, at: str) -> Iterator[str]:
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(key, str) and key.startswith(prefixes):
                    yield f"{at}.{key}"
                yield from inline_vars(value, f"{at}.{key}")

    for inv in inventories:
        assert (inv / "hosts.yml").is_file(), f"{inv.relative_to(REPO)}: no hosts.yml"
        found = list(inline_vars(load(inv / "hosts.yml"), "hosts.yml"))
        assert not found, f"{inv.relative_to(REPO)}: role settings inline: {found}"
