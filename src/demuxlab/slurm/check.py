"""The slurm profile's settings, checked against the cluster before the first job (one line each).

The workflow calls :func:`check_settings` when the controller starts (not in the jobs, not for ``--lint``);
a bad setting stops it with ``demuxlab: error: slurm.<setting>: …`` naming the value and what the cluster
has instead: a partition that does not exist, an account the user has no association with, a constraint
no two nodes satisfy, fewer than two usable nodes, a time limit (the partition's) shorter than a run.
The client commands are Slurm's own (``sinfo``, ``scontrol``, ``sacctmgr``), read-only.
"""

from __future__ import annotations

import math
import os
import pwd
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from demuxlab.errors import ConfigError
from demuxlab.slurm.lanes import group_time_limit_min, parse_group_runs

# Node states (sinfo %T, lower case) in which a node takes no new job.
UNUSABLE = ("down", "drain", "fail", "maint", "reboot", "power", "not_responding", "inval", "future", "unk")


@dataclass(frozen=True)
class SlurmSettings:
    """``slurm:`` of the workflow config (schemas/config.schema.yaml)."""

    conf: str = ""
    partition: str = ""
    account: str = ""
    constraint: str = ""
    classes: tuple[str, ...] = ()
    time_margin_s: float = 300.0
    pairs: int = 2
    stage: str = "shared"
    drain: str = "auto"
    launcher: str = "native"
    group_runs: int = 0  # runs of a lane per job; 0: chosen from the run's length and the partition's limit

    @classmethod
    def from_config(cls, doc: dict[str, Any]) -> SlurmSettings:
        return cls(
            conf=str(doc.get("conf") or ""),
            partition=str(doc.get("partition") or ""),
            account=str(doc.get("account") or ""),
            constraint=str(doc.get("constraint") or ""),
            classes=tuple(str(c) for c in doc.get("classes") or ()),
            time_margin_s=float(doc.get("time_margin_s", 300)),
            pairs=int(doc.get("pairs", 2)),
            stage=str(doc.get("stage") or "shared"),
            drain=str(doc.get("drain") or "auto"),
            launcher=str(doc.get("launcher") or "native"),
            group_runs=parse_group_runs(doc.get("group_runs", 0)),
        )

    def full_constraint(self, pinned: str | None = None) -> str:
        """The job's ``--constraint``: the setting, the classes (both nodes with the same one, Slurm's
        "matching OR"), and the feature of a class the spec pins."""
        parts = (
            [f"({self.constraint})" if "|" in self.constraint else self.constraint] if self.constraint else []
        )
        if pinned:
            parts.append(pinned)
        elif self.classes:
            parts.append("[" + "|".join(self.classes) + "]")
        return "&".join(p for p in parts if p)


@dataclass(frozen=True)
class ClusterView:
    """What the checks found: the partition used, its usable nodes (after the constraint and quarantine)."""

    partition: str
    account: str | None
    nodes: tuple[str, ...]
    max_time_min: int | None
    features: dict[str, tuple[str, ...]] = field(default_factory=dict)


def slurm_command(cmd: Sequence[str], timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise ConfigError(
            f"slurm: {cmd[0]} not found: this machine needs Slurm's client commands (Debian: slurm-client)"
        ) from None
    except subprocess.TimeoutExpired:
        raise ConfigError(f"slurm: `{' '.join(cmd[:3])}` got no answer within {timeout:g} s") from None


def _first_error(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    return (errors or lines or [f"exit status {proc.returncode}"])[-1]


def minutes(seconds: float) -> int:
    return max(1, math.ceil(seconds / 60.0))


def parse_max_time(text: str) -> int | None:
    """Slurm's MaxTime (``UNLIMITED``, ``M``, ``M:S``, ``H:M:S``, ``D-H[:M[:S]]``) in minutes; None: none."""
    text = text.strip()
    if not text or text.upper() in ("UNLIMITED", "INFINITE", "NONE"):
        return None
    days = 0
    if "-" in text:
        d, text = text.split("-", 1)
        days = int(d)
        parts = [int(p) for p in text.split(":")]
        while len(parts) < 3:
            parts.append(0)
        h, m, s = parts[:3]
    else:
        parts = [int(p) for p in text.split(":")]
        if len(parts) == 1:
            h, m, s = 0, parts[0], 0
        elif len(parts) == 2:
            h, m, s = 0, parts[0], parts[1]
        else:
            h, m, s = parts[:3]
    return days * 1440 + h * 60 + m + (1 if s else 0)


# -- constraints: Slurm's feature expressions, for counting the nodes that satisfy one ------------------


def _tokens(expr: str) -> list[str]:
    return [t for t in re.split(r"(\[|\]|\(|\)|&|\||,)", expr.replace(" ", "")) if t]


def nodes_satisfying(expr: str, features: dict[str, tuple[str, ...]]) -> list[str]:
    """The largest set of nodes one job with ``--constraint expr`` may get: for a matching OR ``[a|b]``,
    the largest group sharing one option; otherwise every node whose features satisfy the expression.
    Supports ``&``, ``|``, parentheses and one ``[…|…]`` group (what the settings produce)."""
    if not expr:
        return sorted(features)
    m = re.search(r"\[([^\]]*)\]", expr)
    if m:
        best: list[str] = []
        for option in m.group(1).split("|"):
            fixed = expr[: m.start()] + f"({option})" + expr[m.end() :]
            found = nodes_satisfying(fixed, features)
            if len(found) > len(best):
                best = found
        return best
    return sorted(n for n, feats in features.items() if _eval(_tokens(expr), set(feats)))


def _eval(tokens: list[str], have: set[str]) -> bool:
    pos = 0

    def expr_or() -> bool:
        nonlocal pos
        value = expr_and()
        while pos < len(tokens) and tokens[pos] == "|":
            pos += 1
            value = expr_and() or value
        return value

    def expr_and() -> bool:
        nonlocal pos
        value = atom()
        while pos < len(tokens) and tokens[pos] in ("&", ","):
            pos += 1
            value = atom() and value
        return value

    def atom() -> bool:
        nonlocal pos
        if pos >= len(tokens):
            raise ConfigError("slurm.constraint: incomplete expression")
        tok = tokens[pos]
        pos += 1
        if tok == "(":
            value = expr_or()
            if pos >= len(tokens) or tokens[pos] != ")":
                raise ConfigError("slurm.constraint: unbalanced parentheses")
            pos += 1
            return value
        if tok in ("&", "|", ")", ","):
            raise ConfigError(f"slurm.constraint: unexpected {tok!r}")
        return tok.split("*")[0] in have

    result = expr_or()
    if pos != len(tokens):
        raise ConfigError(f"slurm.constraint: unexpected {tokens[pos]!r}")
    return result


# -- the checks --------------------------------------------------------------------------------------------


def check_settings(
    settings: SlurmSettings,
    run_s: float,
    *,
    pinned_class: str | None = None,
    quarantined: Sequence[str] = (),
) -> ClusterView:
    """Check ``settings`` against the cluster for runs of at most ``run_s`` seconds (warm-up + measure +
    cool-down); raise :class:`ConfigError` with one line naming the first bad setting."""
    if settings.conf and not os.path.isfile(settings.conf):
        raise ConfigError(f"slurm.conf: {settings.conf}: no such file (the cluster's slurm.conf, or empty)")
    proc = slurm_command(["sinfo", "-h", "-o", "%P|%a"])
    if proc.returncode != 0:
        where = settings.conf or os.environ.get("SLURM_CONF") or "Slurm's default configuration"
        raise ConfigError(f"slurm.conf: cannot reach Slurm with {where}: {_first_error(proc)}")
    partitions: dict[str, str] = {}
    default = None
    for line in proc.stdout.splitlines():
        name, _, avail = line.strip().partition("|")
        if name.endswith("*"):
            name = name[:-1]
            default = name
        if name:
            partitions[name] = avail
    partition = settings.partition or default
    if partition is None:
        names = ", ".join(sorted(partitions))
        raise ConfigError(f"slurm.partition: the cluster has no default partition; set one of: {names}")
    if partition not in partitions:
        raise ConfigError(
            f"slurm.partition: no partition {partition!r} on this cluster (partitions: "
            f"{', '.join(sorted(partitions)) or 'none'})"
        )
    if partitions[partition] != "up":
        raise ConfigError(f"slurm.partition: partition {partition!r} is {partitions[partition]}, not up")
    account = _check_account(settings.account)
    info = _fields(slurm_command(["scontrol", "-o", "show", "partition", partition]).stdout)
    max_time = parse_max_time(info.get("MaxTime", "UNLIMITED"))
    need = minutes(run_s + settings.time_margin_s)
    if max_time is not None and need > max_time:
        raise ConfigError(
            f"slurm.partition: {partition!r} allows jobs of {max_time} min, shorter than a run's time limit "
            f"of {need} min (the runs' {run_s:g} s plus slurm.time_margin_s {settings.time_margin_s:g} s)"
        )
    features, states = _nodes(partition)
    constraint = settings.full_constraint(pinned_class)
    matching = nodes_satisfying(constraint, features)
    if constraint and len(matching) < 2:
        have = sorted({f for fs in features.values() for f in fs})
        what = "no node has it" if not matching else f"only {matching[0]} satisfies it"
        raise ConfigError(
            f"slurm.constraint: {constraint!r}: {what} in partition {partition!r}, a run needs two nodes "
            f"(features there: {', '.join(have) or 'none'})"
        )
    usable = [
        n for n in matching if not any(u in states.get(n, "") for u in UNUSABLE) and n not in quarantined
    ]
    if len(usable) < 2:
        why = "; ".join(
            f"{n}: {'quarantined' if n in quarantined else states.get(n, '?')}"
            for n in matching
            if n not in usable
        )
        raise ConfigError(
            f"slurm.partition: fewer than 2 nodes available in {partition!r}"
            + (f" with constraint {constraint!r}" if constraint else "")
            + f" ({len(usable)} usable{'; ' + why if why else ''})"
        )
    return ClusterView(partition, account, tuple(usable), max_time, {n: features[n] for n in usable})


def partition_max_time(partition: str) -> int | None:
    """The partition's (empty: the default partition's) MaxTime in minutes; None: no limit, or Slurm did
    not say (the settings' check then names what is wrong)."""
    try:
        if not partition:
            proc = slurm_command(["sinfo", "-h", "-o", "%P"])
            partition = next((p[:-1] for p in proc.stdout.split() if p.endswith("*")), "")
        if not partition:
            return None
        info = _fields(slurm_command(["scontrol", "-o", "show", "partition", partition]).stdout)
        return parse_max_time(info.get("MaxTime", "UNLIMITED"))
    except (ConfigError, ValueError):
        return None


def _fields(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for token in text.split():
        key, sep, value = token.partition("=")
        if sep:
            out[key] = value
    return out


def _nodes(partition: str) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    proc = slurm_command(["sinfo", "-h", "-N", "-p", partition, "-o", "%N|%f|%T"])
    if proc.returncode != 0:
        raise ConfigError(f"slurm.partition: {partition!r}: sinfo failed: {_first_error(proc)}")
    features: dict[str, tuple[str, ...]] = {}
    states: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 3:
            continue
        node, feats, state = parts
        features[node] = tuple(f for f in feats.split(",") if f and f != "(null)")
        states[node] = state.lower()
    return features, states


def _check_account(account: str) -> str | None:
    """The account jobs are charged to: the setting, checked against the user's associations, else the
    user's default account; None when the cluster keeps no accounts (no slurmdbd)."""
    user = pwd.getpwuid(os.getuid()).pw_name
    proc = slurm_command(["sacctmgr", "-n", "-P", "show", "assoc", f"user={user}", "format=account"])
    if proc.returncode != 0:
        if account:
            raise ConfigError(
                f"slurm.account: {account!r} cannot be checked: the cluster keeps no accounts "
                f"({_first_error(proc)}); leave it empty"
            )
        return None
    accounts = sorted({line.strip() for line in proc.stdout.splitlines() if line.strip()})
    if account:
        if account not in accounts:
            raise ConfigError(
                f"slurm.account: {account!r} is not an account of user {user} on this cluster "
                f"(accounts: {', '.join(accounts) or 'none'})"
            )
        return account
    proc = slurm_command(["sacctmgr", "-n", "-P", "show", "user", user, "format=defaultaccount"])
    default = (
        proc.stdout.strip().splitlines()[0].strip() if proc.returncode == 0 and proc.stdout.strip() else ""
    )
    return default or None


def settings_doc(config: dict[str, Any], checked: list[dict[str, Any]], state: Any) -> dict[str, Any]:
    """What the workflow's rule ``slurm_settings`` writes (``demuxlab slurm check``): the settings
    (``slurm:`` of the workflow config) checked against the cluster for the experiments' plans (their
    spec, phases and pinned hardware class). The partition and account jobs use, the usable nodes, each
    experiment's ``--constraint`` and its jobs' time limit."""
    from pathlib import Path

    from demuxlab.slurm.nodes import _read, quarantined

    settings = SlurmSettings.from_config(config)
    known_classes = _read(Path(state) / "classes.json")
    constraints: dict[str, str] = {}
    view: ClusterView | None = None
    longest = max((sum(float(v) for v in doc["phases"].values()) for doc in checked), default=0.0)
    for doc in checked:
        pinned = doc.get("hardware_class")
        feature = None
        if pinned:
            features = known_classes.get(pinned) or []
            if not settings.classes or not features:
                raise ConfigError(
                    f"{doc['spec']}: hardware_class: {pinned}: no Slurm node feature is known for this class "
                    "(set slurm.classes to the features naming classes, run the experiment unpinned once)"
                )
            feature = features[0]
        view = check_settings(
            settings, longest, pinned_class=feature, quarantined=list(quarantined(Path(state)))
        )
        constraints[str(doc["experiment"])] = settings.full_constraint(feature)
    if view is None:
        raise ConfigError("slurm: no experiment to run")
    # K runs of a lane per job (the workflow's choice for group_runs: 0, else the setting), each job's time
    # limit K runs plus the margin: within the partition's limit.
    sizes = {str(k): int(v) for k, v in (config.get("group_sizes") or {}).items()}
    slack = float(config.get("run_slack_s", 0))
    limits: dict[str, int] = {}
    for doc in checked:
        name = str(doc["experiment"])
        k = sizes.get(name) or settings.group_runs or 1
        run_s = sum(float(v) for v in doc["phases"].values())
        limits[name] = group_time_limit_min(k, run_s, slack, settings.time_margin_s)
        if view.max_time_min is not None and limits[name] > view.max_time_min:
            raise ConfigError(
                f"slurm.group_runs: {k}: a job of {k} runs of {name!r} needs {limits[name]} min ({k} x "
                f"({run_s:g} s + {slack:g} s per run) + slurm.time_margin_s {settings.time_margin_s:g} s), "
                f"partition {view.partition!r} allows {view.max_time_min} min (fewer runs per job, or 0: as "
                "many as fit)"
            )
    return {
        "partition": view.partition,
        "account": view.account,
        "nodes": list(view.nodes),
        "max_time_min": view.max_time_min,
        "constraints": constraints,
        # Runs of a lane per job, and a job's time limit: K runs (each its phases plus the per-run slack)
        # plus slurm.time_margin_s, in minutes (demuxlab.slurm.lanes.group_time_limit_min).
        "group_runs": {name: sizes.get(name) or settings.group_runs or 1 for name in limits},
        "time_limit_min": limits,
    }
