"""The orchestration every launcher shares: start the server, wait until it listens, drive it with the
client through warm-up → measure → cool-down, stop the server, and assemble the run record
(docs/CONTRACTS.md §5).

A launcher subclass says only how an argument vector becomes a running process pinned to some CPUs
(:meth:`Launcher.wrap`) and what identifies the code it runs (:meth:`Launcher.artifacts`). Everything that
can go wrong during a run (server refuses to start, client reports a stall, a process crashes) ends as a
*failed* record with a one-line ``failure_reason``; only a broken environment (no binary, no engine)
raises.

(Over 500 lines on purpose: one concern, the run's timeline, whose steps share the outcome being built: the
server's start and stop, the client's watch (its progress for a steady stop, its phase events for the
kernel's counters, demuxlab.launch.counters) and the record assembled from all of them.)
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import selectors
import signal
import subprocess
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any

from demuxlab.phases import Phases
from demuxlab.plan import Pinning
from demuxlab.point import Point
from demuxlab.steady import SteadyDecision, SteadyRule, check, warm
from demuxlab.vocab import RUN_FAILED, RUN_OK, RUN_RECORD_FORMAT

if TYPE_CHECKING:
    from demuxlab.lease import Lease


# How long the server may take to print its listening line, and to exit after SIGTERM. Generous: under
# TSan or in a container that is still starting these take seconds, and a slow start is not a failure.
SERVER_START_TIMEOUT_S = 20.0
SERVER_STOP_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class RunRequest:
    """Everything one run needs; the launcher adds nothing that is not recorded."""

    run_id: str
    experiment: dict[str, Any]  # name, spec_sha256, git_rev, spec_path
    point: Point
    repeat: int
    phases: Phases
    pinning: Pinning
    hosts: dict[str, dict[str, Any]]  # "server" / "client" topology facts
    attempt: int = 1
    host_pair: str = "local"
    server_addr: str = "127.0.0.1"
    port: int = 0
    instrument: bool = False
    stall_timeout_s: float = 5.0
    # An adaptive sweep's runs that end when steady (docs/adaptive.md): the client reports each second
    # (--progress) and is told to end its measure phase (SIGUSR1) once demuxlab.steady says so.
    steady: SteadyRule | None = None
    # The kernel's counters over the measure phase (the record's ``costs``, demuxlab.launch.counters),
    # read where the client prints its phase boundaries (--phase-events).
    collect_costs: bool = True
    # With them, the kernel's own count of the system calls beside the binaries' (a perf counter on a
    # tracepoint: it costs every system call on the host, so only on request; the record's `syscalls` are
    # the binaries' own counts either way).
    count_syscalls: bool = False
    # The pair lease the run holds (demuxlab.lease): server and client inherit its descriptor, so the
    # pair stays busy while any of them lives, and are recorded in it as the run's children.
    lease: Lease | None = field(default=None, compare=False, repr=False)


def total_s(phases: Phases) -> float:
    return phases.warmup_s + phases.measure_s + phases.cooldown_s


@dataclass
class _Outcome:
    """What a run produced so far; turned into the record at the end, whatever happened."""

    server: dict[str, Any] | None = None
    client: dict[str, Any] | None = None
    failure: str | None = None
    notes: list[str] = field(default_factory=list)
    steady: SteadyDecision | None = None  # the last steady-stop decision (the one that stopped the run)
    server_pid: tuple[int | None, str | None] = (None, None)  # (pid on this host, or why not)
    collector: Any = None  # demuxlab.launch.counters.Collector, made at the measure phase's start

    def fail(self, reason: str) -> None:
        # The first failure is the cause; later ones are usually its consequences.
        if self.failure is None:
            self.failure = " ".join(reason.split())[:500]


def _utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def num(value: float) -> str:
    """A number as the binaries' strict parsers take it: fixed point, never an exponent (3e+06)."""
    return f"{value:.6f}".rstrip("0").rstrip(".")


def cpu_list(cpus: Sequence[int]) -> str:
    return ",".join(str(c) for c in cpus)


def _json_lines(text: str, event: str) -> list[dict[str, Any]]:
    """Every line of ``text`` that is a JSON object with this ``event``, in order."""
    out: list[dict[str, Any]] = []
    for line in text.splitlines():
        if not line.startswith('{"event": "' + event + '"'):
            continue
        with contextlib.suppress(json.JSONDecodeError):
            doc = json.loads(line)
            if isinstance(doc, dict):
                out.append(doc)
    return out


def _last_json_line(text: str, event: str | None = None) -> dict[str, Any] | None:
    for line in reversed(text.splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(doc, dict) and (event is None or doc.get("event") == event):
            return doc
    return None


_PR_SET_PDEATHSIG = 1
try:
    _LIBC: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover (no libc: not Linux)
    _LIBC = None


def die_with_parent(then: Callable[[], None] | None = None) -> Callable[[], None]:
    """A ``preexec_fn``: the child gets SIGKILL when the process that started it dies (even by kill -9),
    then runs ``then`` (pinning). Built before the fork, so the child only calls prctl and getppid."""
    parent = os.getpid()
    libc = _LIBC

    def prepare() -> None:
        if libc is not None:
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGKILL)
        if then is not None:
            then()

    return prepare


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


class Launcher(ABC):
    """Runs server and client for one run; subclasses map argument vectors to pinned processes."""

    name: str = ""
    host_pair: str = "local"  # the pair of the run in progress (labels on what it starts)

    @abstractmethod
    def artifacts(self) -> dict[str, dict[str, Any]]:
        """What code runs: ``{"server": {...}, "client": {...}}`` (binary hashes or image digests)."""

    @abstractmethod
    def wrap(self, role: str, argv: list[str], cpus: Sequence[int], run_id: str) -> list[str]:
        """The command line that runs ``argv`` (binary name first) pinned to ``cpus``."""

    def preexec(self, cpus: Sequence[int]) -> Any:
        """A callable run in the child before exec (native pinning), or None."""
        return None

    def cleanup(self, run_id: str) -> None:  # noqa: B027 (optional hook)
        """Remove whatever a run may have left behind (containers); must not raise."""

    def end_orphans(self, pair: str) -> list[str]:
        """End what earlier runs on ``pair`` left running outside this host's process tree (containers).

        Called with the pair's lease held: nothing of a live run can be running on it, so whatever is
        found is an orphan. Returns what was ended, for the log.
        """
        return []

    def check(self) -> None:  # noqa: B027 (optional hook)
        """Raise :class:`~demuxlab.errors.LaunchError` if this launcher cannot run here."""

    def role_pid(self, role: str, proc: subprocess.Popen[str], run_id: str) -> tuple[int | None, str | None]:
        """The pid on this host of the role's process (its counters are read in ``/proc``), or why none."""
        return None, f"the {self.name} launcher runs the {role} where this host cannot read its counters"

    def terminate(self, proc: subprocess.Popen[str]) -> None:
        proc.send_signal(signal.SIGTERM)  # the server prints its exit JSON and exits

    def steady_stats(self, per_second: list[float]) -> dict[str, Any]:
        from demuxlab.stats import steady_state  # here: numpy/scipy are a run process's largest import

        return steady_state(per_second).to_json()

    # -- the shared orchestration ------------------------------------------------------------------------

    def server_args(self, req: RunRequest) -> list[str]:
        p = req.point
        args = [
            "demux-server",
            "--pattern", p.pattern,
            "--notifier", p.notifier,
            "--threads", str(p.threads),
            "--port", str(req.port),
            "--bind", req.server_addr,
            "--work-us", num(p.work_us),
            "--msg-size", str(p.msg_size),
            "--cpus", cpu_list(req.pinning.server_cpus),
        ]  # fmt: skip
        if req.instrument:
            args.append("--instrument")
        return args

    def client_args(self, req: RunRequest, port: int) -> list[str]:
        p, ph = req.point, req.phases
        args = [
            "demux-client",
            "--host", req.server_addr,
            "--port", str(port),
            "--connections", str(p.connections),
            "--threads", str(p.client_threads),
            "--msg-size", str(p.msg_size),
            "--warmup", num(ph.warmup_s),
            "--duration", num(ph.measure_s),
            "--cooldown", num(ph.cooldown_s),
            "--cpus", cpu_list(req.pinning.client_cpus),
            "--stall-timeout", num(req.stall_timeout_s),
        ]  # fmt: skip
        if p.rate is not None:
            args += ["--rate", num(p.rate)]
        if req.steady is not None:
            args.append("--progress")
        if req.collect_costs:
            args.append("--phase-events")
        return args

    def run(self, req: RunRequest) -> dict[str, Any]:
        """Run ``req`` and return its run record; never raises for a failure of the run itself."""
        started_at, t0 = _utc_now(), time.monotonic()
        self.host_pair = req.host_pair
        self.check()
        artifacts = self.artifacts()
        out = _Outcome()
        try:
            with self._server(req, out) as port:
                if port is not None:
                    self._client(req, port, out)
        finally:
            self.cleanup(req.run_id)
        wall = time.monotonic() - t0
        return self._record(req, out, artifacts, started_at, wall)

    @contextlib.contextmanager
    def _server(self, req: RunRequest, out: _Outcome) -> Iterator[int | None]:
        argv = self.wrap("server", self.server_args(req), req.pinning.server_cpus, req.run_id)
        with tempfile.TemporaryFile(mode="w+") as err:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                preexec_fn=die_with_parent(self.preexec(req.pinning.server_cpus)),
                pass_fds=_lease_fds(req),
            )
            if req.lease is not None:
                req.lease.add_child(proc.pid, "server")
            assert proc.stdout is not None
            stdout_head = ""
            try:
                port, stdout_head = self._wait_listening(proc, proc.stdout)
                if port is not None and req.collect_costs:
                    out.server_pid = self.role_pid("server", proc, req.run_id)
                if port is None:
                    err.seek(0)
                    reason = _first_line(err.read()) or f"server exited with status {proc.poll()}"
                    out.fail(f"server did not start: {reason}")
                yield port
            finally:
                rest, stop_failure = self._stop(proc)
                err.seek(0)
                stderr = err.read()
                out.server = _last_json_line(stdout_head + rest, "exit")
                if out.collector is not None:  # its counts of system calls, asked at the phase boundaries
                    out.collector.take_server_lines(_json_lines(stdout_head + rest, "syscalls"))
                if stop_failure:
                    out.fail(f"{stop_failure}: {_first_line(stderr)}" if stderr.strip() else stop_failure)
                elif out.server is None and out.failure is None:
                    out.fail(f"server printed no exit JSON: {_first_line(stderr)}")

    def _wait_listening(self, proc: subprocess.Popen[str], stdout: IO[str]) -> tuple[int | None, str]:
        """Wait for ``{"event": "listening", "port": N}``; return the port (None if the server died)."""
        seen = ""
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        with selectors.DefaultSelector() as sel:
            sel.register(stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                    break
                line = stdout.readline()
                if not line:  # EOF: the server exited
                    return None, seen
                seen += line
                doc = _last_json_line(line, "listening")
                if doc is not None and isinstance(doc.get("port"), int):
                    return int(doc["port"]), seen
        return None, seen

    def _stop(self, proc: subprocess.Popen[str]) -> tuple[str, str | None]:
        """SIGTERM the server and collect the rest of its stdout; the second value is a failure, if any."""
        if proc.poll() is None:
            self.terminate(proc)
        try:
            rest, _ = proc.communicate(timeout=SERVER_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            rest, _ = proc.communicate()
            return rest or "", f"server did not exit within {SERVER_STOP_TIMEOUT_S:g} s of SIGTERM"
        if proc.returncode != 0:
            return rest or "", f"server exited with status {proc.returncode}"
        return rest or "", None

    def _client(self, req: RunRequest, port: int, out: _Outcome) -> None:
        argv = self.wrap("client", self.client_args(req, port), req.pinning.client_cpus, req.run_id)
        if req.steady is not None:
            warm()
        # The client stops itself; the margin covers connecting and a stall timeout.
        limit = total_s(req.phases) + req.stall_timeout_s + 30.0
        with subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=die_with_parent(self.preexec(req.pinning.client_cpus)),
            pass_fds=_lease_fds(req),
        ) as proc:
            if req.lease is not None:
                req.lease.add_child(proc.pid, "client")
            on_phase = self._phase_reader(req, proc, out) if req.collect_costs else None
            try:
                if req.steady is not None or on_phase is not None:
                    stdout, stderr = self._watch_steady(proc, req.steady, limit, out, on_phase)
                else:
                    stdout, stderr = proc.communicate(timeout=limit)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                out.fail(f"client did not finish within {limit:g} s")
                return
            except BaseException:
                proc.kill()
                raise
            finally:
                if out.collector is not None:
                    out.collector.close()
        out.client = _last_json_line(stdout)
        stderr = "\n".join(line for line in stderr.splitlines() if not line.startswith('{"event"'))
        if proc.returncode != 0:
            detail = _first_line(stderr) or (out.client or {}).get("error") or "no reason given"
            out.fail(f"client exited with status {proc.returncode}: {detail}")
        elif out.client is None or not out.client.get("ok", False):
            out.fail(f"client printed no result: {_first_line(stderr)}")

    def _phase_reader(
        self, req: RunRequest, proc: subprocess.Popen[str], out: _Outcome
    ) -> Callable[[dict[str, Any]], None]:
        """What reads the sides' counters at each of the client's phase events (demuxlab.launch.counters)."""
        from demuxlab.launch.counters import for_run

        def client_pid() -> tuple[int | None, str | None]:
            return self.role_pid("client", proc, req.run_id)

        pinning = req.pinning
        out.collector = for_run(
            pinning.server_cpus, pinning.client_cpus, out.server_pid, client_pid, req.count_syscalls
        )
        on_phase: Callable[[dict[str, Any]], None] = out.collector.on_phase
        return on_phase

    @staticmethod
    def _watch_steady(
        proc: subprocess.Popen[str],
        rule: SteadyRule | None,
        limit: float,
        out: _Outcome,
        on_phase: Callable[[dict[str, Any]], None] | None = None,
    ) -> tuple[str, str]:
        """Read the client's per-second progress as it comes, judge it after each second
        (:func:`demuxlab.steady.check`) and tell the client to end its measure phase (SIGUSR1) the first time
        it is steady; return its stdout and stderr. Raises ``TimeoutExpired`` past ``limit`` seconds.
        Without a ``rule``, only its phase events are read (``on_phase``: the kernel's counters).

        The pipes are read with ``os.read`` on their descriptors: a text stream's buffer could hold a line
        that ``select`` no longer sees, and the stop would come a second late."""
        assert proc.stdout is not None and proc.stderr is not None
        deadline = time.monotonic() + limit
        fds = {proc.stdout.fileno(): "stdout", proc.stderr.fileno(): "stderr"}
        data: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        judged = 0  # bytes of stderr already split into lines
        samples: list[float] = []
        with selectors.DefaultSelector() as sel:
            for fd in fds:
                sel.register(fd, selectors.EVENT_READ)
            while sel.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise subprocess.TimeoutExpired(proc.args, limit)
                for key, _ in sel.select(timeout=left):
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        sel.unregister(key.fd)
                        continue
                    data[fds[key.fd]] += chunk
                end = data["stderr"].rfind(b"\n") + 1
                lines = bytes(data["stderr"][judged:end]).decode("utf-8", "replace").splitlines()
                judged = max(judged, end)
                for line in lines:
                    if on_phase is not None and line.startswith('{"event": "phase"'):
                        phase = _last_json_line(line, "phase")
                        if phase is not None:
                            on_phase(phase)
                        continue
                    doc = _last_json_line(line, "second")
                    if rule is None or doc is None or not isinstance(doc.get("msgs_per_s"), int | float):
                        continue
                    samples.append(float(doc["msgs_per_s"]))
                    if out.steady is not None and out.steady.stop:
                        continue
                    out.steady = check(samples, rule.min_s, rule.target_rel)
                    if out.steady.stop and proc.poll() is None:
                        proc.send_signal(signal.SIGUSR1)
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        return (
            bytes(data["stdout"]).decode("utf-8", "replace"),
            bytes(data["stderr"]).decode("utf-8", "replace"),
        )

    def _record(
        self,
        req: RunRequest,
        out: _Outcome,
        artifacts: dict[str, dict[str, Any]],
        started_at: str,
        wall_s: float,
    ) -> dict[str, Any]:
        stats: dict[str, Any] | None = None
        per_second = (out.client or {}).get("per_second")
        if out.failure is None and isinstance(per_second, list) and per_second:
            stats = self.steady_stats([float(x) for x in per_second])
            if stats.get("stationary") is False and stats.get("drift_rel") is not None:
                out.notes.append(f"throughput drifts by {stats['drift_rel']:+.1%} over the measure phase")
        pinning = req.pinning.to_json()
        pinning["notes"] = list(pinning.get("notes", [])) + out.notes
        return {
            **_identity(req, self.name),
            "host_pair": req.host_pair,
            "status": RUN_OK if out.failure is None else RUN_FAILED,
            "failure_reason": out.failure,
            "started_at": started_at,
            "finished_at": _utc_now(),
            "phases": req.phases.to_json(),
            "hosts": req.hosts,
            "pinning": pinning,
            "artifacts": artifacts,
            "server": out.server,
            "client": out.client,
            "stats": stats,
            # Wall time outside the phases; meaningless for a run cut short by its failure.
            "orchestration_s": round(wall_s - _ran_s(req, out), 4) if out.failure is None else None,
            **_steady_stop(req, out),
            **({"costs": out.collector.result()} if out.collector is not None else {}),
        }


def _ran_s(req: RunRequest, out: _Outcome) -> float:
    """Seconds of phases the run had: the measure phase as long as the client measured (a run that ended
    when steady measured less than the spec's)."""
    measured = (out.client or {}).get("duration_s")
    if req.steady is None or not isinstance(measured, int | float):
        return total_s(req.phases)
    return req.phases.warmup_s + min(float(measured), req.phases.measure_s) + req.phases.cooldown_s


def _steady_stop(req: RunRequest, out: _Outcome) -> dict[str, Any]:
    """The record's ``steady_stop`` (CONTRACTS.md §5): the rule, whether the run stopped early, after how
    many measured seconds (the client's own count), and the decision it stopped on (or the last one)."""
    if req.steady is None:
        return {}
    decision = out.steady or SteadyDecision(False, 0, None, None, 0, "no per-second progress from the client")
    doc = decision.to_json(req.steady.min_s, req.steady.target_rel, req.phases.measure_s)
    client = out.client or {}
    doc["stopped_early"] = bool(client.get("stopped_early", False))
    if isinstance(client.get("duration_s"), int | float):
        doc["measured_s"] = float(client["duration_s"])
    return {"steady_stop": doc}


def _identity(req: RunRequest, launcher: str) -> dict[str, Any]:
    """The first fields of every run record: what ran (CONTRACTS.md §5)."""
    return {
        "format": RUN_RECORD_FORMAT,
        "run_id": req.run_id,
        "experiment": req.experiment,
        "point": req.point.to_json(),
        "repeat": req.repeat,
        "attempt": req.attempt,
        "launcher": launcher,
    }


def failed_record(req: RunRequest, reason: str, launcher: str) -> dict[str, Any]:
    """The record of a run that failed before its launcher could run it (no pair, a lost host): no
    results; hosts and pinning only when the run had them."""
    now = _utc_now()
    return {
        **_identity(req, launcher),
        "host_pair": req.host_pair if req.hosts else None,
        "status": RUN_FAILED,
        "failure_reason": reason,
        "started_at": now,
        "finished_at": now,
        "phases": req.phases.to_json(),
        "hosts": req.hosts or None,
        "pinning": req.pinning.to_json() if req.hosts else None,
        "artifacts": None,
        "server": None,
        "client": None,
        "stats": None,
        "orchestration_s": None,
    }


def _lease_fds(req: RunRequest) -> tuple[int, ...]:
    return (req.lease.fd,) if req.lease is not None and req.lease.held else ()


def sha256_file(path: os.PathLike[str] | str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
