"""``demuxlab run-point --pairs-from SOURCE``: one run on whichever healthy pair is free.

The run takes a pair (:mod:`demuxlab.cluster.schedule`), runs on it with the ``remote`` launcher (or
``sim`` on a simulated cluster), records the pair, both hosts, their hardware class and the noise check in
its run record, counts the outcome on the pair (quarantining it after ``quarantine_after`` failures in a
row), and releases the lease. A failed attempt before the last exits non-zero so the workflow retries the
run; the retry prefers pairs it has not failed on, so a lost host costs one attempt, never the run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from demuxlab.cluster.progress import progress_doc, write_progress
from demuxlab.cluster.schedule import (
    NoPairError,
    TryAcquire,
    assign_pair,
    default_try_acquire,
    eligible_pairs,
)
from demuxlab.cluster.state import read_state, record_outcome, write_state
from demuxlab.errors import ConfigError, DemuxlabError, LaunchError
from demuxlab.launch.base import Launcher, RunRequest, failed_record
from demuxlab.plan import plan_pinning
from demuxlab.remote.hostpairs import ClusterPair, PairsSource, hardware_class, load_pairs, sim_facts
from demuxlab.vocab import RUN_OK


@dataclass(frozen=True)
class ClusterOptions:
    pairs_from: str
    state: Path  # results/cluster: pairs/, facts/
    launcher: str = "remote"  # remote | sim
    lane: int = 0
    quarantine_after: int = 3
    pair_wait_s: float = 3600.0
    noise_wait_s: float = 60.0


def host_facts(source: PairsSource, state: Path) -> dict[str, dict[str, Any]]:
    """Facts of every host: collected ones from ``<state>/facts/<host>.json``, synthetic when simulated."""
    out: dict[str, dict[str, Any]] = {}
    for pair in source.pairs:
        for host in pair.hosts:
            if host.name in out:
                continue
            if pair.sim is not None:
                out[host.name] = sim_facts(host, pair.sim.hardware_class)
                continue
            path = state / "facts" / f"{host.name}.json"
            try:
                out[host.name] = restrict_cpus(json.loads(path.read_text()), host.cpus)
            except FileNotFoundError:
                raise ConfigError(
                    f"{path}: facts of host {host.name} not collected (the workflow's cluster_facts rule "
                    "writes them: `demuxlab cluster facts`)"
                ) from None
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    return out


def restrict_cpus(facts: dict[str, Any], cpus: str | None) -> dict[str, Any]:
    """The facts as the planner may use them: only the CPUs the inventory gives the host, if it does."""
    if not cpus:
        return facts
    from demuxlab.topology import parse_cpu_list

    allowed = set(parse_cpu_list(cpus))
    out = dict(facts)
    out["online_cpus"] = [c for c in facts.get("online_cpus") or [] if c in allowed]
    out["cpus"] = [row for row in facts.get("cpus") or [] if row.get("cpu") in allowed]
    out["allowed_cpus"] = cpus
    return out


def pair_classes(source: PairsSource, facts: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {p.name: hardware_class(facts[p.server.name], facts[p.client.name]) for p in source.pairs}


def tried_pairs(failures_dir: Path, run_id: str) -> set[str]:
    """Pairs on which earlier attempts of this run failed (their records are kept under failures/)."""
    tried: set[str] = set()
    for path in failures_dir.glob(f"{run_id}.attempt*.json"):
        with contextlib.suppress(OSError, json.JSONDecodeError, AttributeError):
            name = json.loads(path.read_text()).get("host_pair")
            if isinstance(name, str):
                tried.add(name)
    return tried


def make_launcher(opts: ClusterOptions, pair: ClusterPair, runs_on_pair: int) -> Launcher:
    if opts.launcher == "sim":
        if pair.sim is None:
            raise ConfigError(f"launcher sim: pair {pair.name} is not simulated (use a simulated pairs file)")
        from demuxlab.launch.sim import SimLauncher

        return SimLauncher(pair, runs_on_pair)
    if opts.launcher == "remote":
        if pair.sim is not None:
            raise ConfigError(f"launcher remote: pair {pair.name} is simulated (use --launcher sim)")
        from demuxlab.launch.remote import RemoteLauncher

        return RemoteLauncher(pair, noise_wait_s=opts.noise_wait_s)
    raise ConfigError(f"--pairs-from runs with the remote or sim launcher, not {opts.launcher!r}")


class Terminated(LaunchError):
    """The run was stopped by SIGTERM: not the pair's fault, nothing recorded."""


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """SIGTERM (the controller's snakemake stopping) unwinds the run, so its containers are removed and
    nothing is recorded; the rerun repeats it."""

    def handler(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise Terminated("run terminated (SIGTERM); its containers were removed", exit_code=143)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_on_cluster(
    base: RunRequest,
    opts: ClusterOptions,
    *,
    failures_dir: Path,
    pinned: str | None = None,
    spec_path: str = "the spec",
    try_acquire: TryAcquire = default_try_acquire,
) -> dict[str, Any]:
    """Run ``base`` on a free healthy pair (of class ``pinned``, the spec's ``hardware_class``, when set)
    and return its record (status ok or failed). ``base`` is the run as its ticket and the command describe
    it; the pair's hosts, their pinning and the lease are added here."""
    run_id = base.run_id
    source = load_pairs(opts.pairs_from)
    facts = host_facts(source, opts.state)
    classes = pair_classes(source, facts)
    eligible = eligible_pairs(source.pairs, {n: c["id"] for n, c in classes.items()}, pinned)
    if not eligible:
        known = ", ".join(sorted({c["id"] for c in classes.values()}))
        raise ConfigError(f"{spec_path}: hardware_class: no pair of class {pinned!r} (pairs have: {known})")
    tried = tried_pairs(failures_dir, run_id)
    try:
        assignment = assign_pair(
            eligible,
            run_id,
            state=opts.state,
            lane=opts.lane,
            tried=tried,
            wait_s=opts.pair_wait_s,
            try_acquire=try_acquire,
        )
    except NoPairError as exc:
        return failed_record(base, exc.message, opts.launcher)
    pair = assignment.pair
    try:
        st = read_state(opts.state, pair.name)
        st.hardware_class = classes[pair.name]["id"]
        st.running = run_id
        write_state(opts.state, st)
        t0 = time.monotonic()
        record = _run_on_pair(base, opts, pair, facts, assignment.lease, st.done + st.failed)
        record["pair"] = {
            "name": pair.name,
            "server": pair.server.to_json(),
            "client": pair.client.to_json(),
            "hardware_class": classes[pair.name],
        }
        record["scheduling"] = {
            "lane": opts.lane,
            "waited_s": round(assignment.waited_s, 3),
            "lease_tries": assignment.tries,
            "avoided": sorted(tried),
            "run_wall_s": round(time.monotonic() - t0, 3),
        }
        ok = record["status"] == RUN_OK
        if record_outcome(st, run_id, ok, record.get("failure_reason"), opts.quarantine_after):
            record["pair"]["quarantined"] = st.quarantine_reason
            print(f"demuxlab: pair {pair.name} quarantined: {st.quarantine_reason}", file=sys.stderr)
        write_state(opts.state, st)
    finally:
        assignment.lease.release()
    return record


def _run_on_pair(
    base: RunRequest,
    opts: ClusterOptions,
    pair: ClusterPair,
    facts: dict[str, dict[str, Any]],
    lease: Any,
    runs_on_pair: int,
) -> dict[str, Any]:
    """The run on ``pair``, whose lease is held: pinned from both hosts' facts, orphans of dead runs
    removed first; a pair whose engine or SSH is gone fails the attempt (a record), SIGTERM unwinds it."""
    server, client = facts[pair.server.name], facts[pair.client.name]
    pinning = plan_pinning(
        server,
        client,
        base.point.threads,
        base.point.client_threads,
        same_host=False,
        server_peer=pair.client.address,  # rule 5: the NIC(s) routing the pair's traffic
        client_peer=pair.server.address or pair.server.ansible_host,
    )
    req = dataclasses.replace(
        base,
        pinning=pinning,
        hosts={"server": server, "client": client},
        host_pair=pair.name,
        server_addr=pair.server.address or pair.server.ansible_host,
        lease=lease,
    )
    launcher = make_launcher(opts, pair, runs_on_pair)
    with _sigterm_unwinds():
        try:
            # With the lease held, whatever a dead run left on the pair's hosts is an orphan. A host that
            # does not answer (powered off, unplugged) fails the attempt here, within seconds.
            orphans = launcher.end_orphans(pair.name)
            if orphans:
                print(f"run {base.run_id}: removed {len(orphans)} orphan(s) on {pair.name}", file=sys.stderr)
            return launcher.run(req)
        except Terminated:
            raise
        except DemuxlabError as exc:  # the pair's engine or SSH is gone: this pair failed the run
            return failed_record(req, f"pair {pair.name}: {exc.message}", opts.launcher)


def update_progress(opts: ClusterOptions) -> None:
    """Rewrite ``progress.json`` (after the run's record is in place, so it counts as finished)."""
    with contextlib.suppress(OSError, ConfigError):
        names = [p.name for p in load_pairs(opts.pairs_from).pairs]
        write_progress(opts.state, progress_doc(opts.state, names))


def sweep_orphans(pairs_from: str, try_acquire: TryAcquire = default_try_acquire) -> list[str]:
    """Remove what killed runs left on every free pair's hosts; one line per pair that had something.

    A run killed with its controller leaves its server container running on its host; the next run that
    takes that pair's lease removes it, but a pair may get no further run in the sweep (its runs went
    elsewhere, or it is quarantined). The workflow calls this after the runs (``demuxlab cluster report``).
    Each pair is swept only under its lease, taken without waiting: a busy pair is running a live run and
    will be swept by that run's successor. A host that does not answer is named and skipped.
    """
    import concurrent.futures

    source = load_pairs(pairs_from)
    if source.simulated:
        return []
    from demuxlab.launch.remote import RemoteLauncher

    def one(pair: ClusterPair) -> str | None:
        lease = try_acquire(pair.name, "orphan-sweep")
        if lease is None:
            return None
        try:
            found = RemoteLauncher(pair).end_orphans(pair.name)
        except DemuxlabError as exc:
            return f"pair {pair.name}: not swept: {exc.message}"
        finally:
            lease.release()
        return f"pair {pair.name}: removed {len(found)} orphan(s): {', '.join(found)}" if found else None

    workers = max(1, min(8, len(source.pairs)))
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        return [line for line in pool.map(one, source.pairs) if line]
