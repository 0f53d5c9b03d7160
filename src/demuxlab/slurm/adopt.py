"""Jobs a killed controller left in Slurm: found when the workflow is typed again, and waited for.

The executor plugin names every job of one controller by that controller's run id and puts the rule and
its wildcards in the job's comment (``rule_run_point_wildcards_<experiment>_<run id>``), and each job's
working folder is the workflow's. So ``squeue --me`` tells which of this workflow's runs still have a job
queued or running; the workflow makes each such run wait for its job (rule ``slurm_adopt``) before it is
submitted again, and the new job then finds the old one's record (:func:`demuxlab.slurm.job.restore_adopted`).
"""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any

from demuxlab.slurm.nodes import slurm_job_state

COMMENT = "rule_run_point_wildcards_"
# A group job's comment: rule_<group id>_run_point (the plugin names a group job by its group and rules; it
# has no wildcards of its own). Group ids: rules/hosts/slurm.smk's run_group.
GROUP_PREFIX = "rule_lane-"
GROUP_SUFFIX = "_run_point"


def live_run_jobs(workdir: str) -> dict[str, int]:
    """Run id (a job of one run) or group id (a job of a group of runs) -> job id of this workflow's run
    jobs still in Slurm's queue (any live state)."""
    try:
        proc = subprocess.run(
            ["squeue", "--me", "-h", "-o", "%i|%k|%Z"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    return parse_live_jobs(proc.stdout, workdir)


def parse_live_jobs(squeue_out: str, workdir: str) -> dict[str, int]:
    """:func:`live_run_jobs` from ``squeue -o %i|%k|%Z``'s lines."""
    here = os.path.realpath(workdir)
    out: dict[str, int] = {}
    for line in squeue_out.splitlines():
        job, _, rest = line.strip().partition("|")
        comment, _, folder = rest.rpartition("|")
        if os.path.realpath(folder) != here or not job.isdigit():
            continue
        if comment.startswith(GROUP_PREFIX) and comment.endswith(GROUP_SUFFIX):
            out[comment[len("rule_") : -len(GROUP_SUFFIX)]] = int(job)
        elif comment.startswith(COMMENT):
            out[comment.rsplit("_", 1)[-1]] = int(job)
    return out


def wait_for_job(job: int, poll_s: float = 5.0) -> dict[str, Any]:
    """Wait until ``job`` has left the queue; its final state (sacct) and how long it took."""
    t0 = time.monotonic()
    while True:
        try:
            proc = subprocess.run(
                ["squeue", "-h", "-j", str(job), "-o", "%T"],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            proc = None
        state = proc.stdout.strip() if proc is not None else ""
        if proc is not None and (proc.returncode != 0 or not state):
            break  # gone from the queue (squeue refuses a job id it no longer knows)
        time.sleep(poll_s)
    return {"job_id": job, "state": slurm_job_state(job), "waited_s": round(time.monotonic() - t0, 1)}
