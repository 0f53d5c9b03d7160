"""How many runs of a lane one Slurm job holds (``slurm.group_runs``, K).

The slurm profile gives each K consecutive runs of a lane one Snakemake group (rules/hosts/slurm.smk), which
the executor plugin submits as one job of two whole nodes; the job's own Snakemake runs them one after the
other in that allocation. The job's time limit is K runs (each its phases plus the workflow's per-run slack)
plus ``slurm.time_margin_s``. ``group_runs: 0`` (the default) takes as many runs as fit in the partition's
time limit, at most :data:`AUTO_GROUP_S` of them: long enough that the job's start-up and the plugin's
polling are a small share of it, short enough that a lane's job does not hold its nodes for a whole day.
"""

from __future__ import annotations

import math

from demuxlab.errors import ConfigError

# The most seconds of runs group_runs: 0 puts in one job.
AUTO_GROUP_S = 3600.0


def run_share_min(run_s: float, slack_s: float, margin_s: float, first: bool) -> int:
    """One run's share of its job's time limit, in minutes rounded up: its phases and the per-run slack, and
    the margin for the first run of the job (rules/hosts/slurm.smk's slurm_runtime; Snakemake sums the
    shares of a group's runs for the job's time limit)."""
    return max(1, math.ceil((run_s + slack_s + (margin_s if first else 0.0)) / 60.0))


def group_time_limit_min(k: int, run_s: float, slack_s: float, margin_s: float) -> int:
    """The time limit of a job of ``k`` runs: K runs (each its phases plus the slack) plus the margin."""
    return run_share_min(run_s, slack_s, margin_s, True) + (k - 1) * run_share_min(run_s, slack_s, 0.0, False)


def auto_group_runs(run_s: float, slack_s: float, margin_s: float, max_time_min: int | None) -> int:
    """K for ``group_runs: 0``: the most runs whose job fits in the partition's limit (None: no limit) and
    whose runs last at most :data:`AUTO_GROUP_S`; at least 1 (the settings' check says when not even one run
    fits)."""
    k = max(1, math.floor(AUTO_GROUP_S / max(1.0, run_s + slack_s)))
    while (
        k > 1
        and max_time_min is not None
        and group_time_limit_min(k, run_s, slack_s, margin_s) > max_time_min
    ):
        k -= 1
    return k


def parse_group_runs(value: object, where: str = "slurm.group_runs") -> int:
    """The setting as an integer >= 0 (0: chosen from the run's length and the partition's limit)."""
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit():
        raise ConfigError(
            f"{where}: {value!r}: a whole number of runs per job, >= 1 (0: chosen automatically)"
        )
    return int(text)
