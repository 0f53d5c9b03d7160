"""Ansible callback: one line per host that failed or was unreachable, at the end of the run.

    demuxlab: FAILED tb2-client: docker engine is down and did not start: ...
    demuxlab: UNREACHABLE tb1-server: ssh: connect to host 172.18.0.2 port 22: Connection timed out

The line names the host and the problem (the task's message, else the last line of its stderr); other
hosts' results stay as Ansible printed them. Enabled in ansible.cfg (``callbacks_enabled``).
"""

from __future__ import annotations

import re
from typing import Any

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: demuxlab_summary
    type: aggregate
    short_description: one line per failed or unreachable host
    description: Prints, after the play recap, one line per host that failed or was unreachable.
    requirements: [enabled in ansible.cfg]
"""


def _one_line(text: str, head: int = 120, tail: int = 220) -> str:
    """Whitespace collapsed; a long text keeps its start (what failed) and its end (why)."""
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= head + tail + 1 else f"{text[:head]}…{text[-tail:]}"


def _problem(result: dict[str, Any]) -> str:
    # A loop's result says "One or more items failed": the first failed item says what.
    items = result.get("results")
    if isinstance(items, list):
        failed = [r for r in items if isinstance(r, dict) and r.get("failed")]
        if failed:
            item = failed[0]
            label = item.get("item")
            text = _problem(item)
            return _one_line(f"{label}: {text}" if isinstance(label, str | int) else text)
    msg = result.get("msg")
    if isinstance(msg, str) and msg.strip() and msg.strip() != "non-zero return code":
        text = msg
    else:
        stderr = (result.get("stderr") or "").strip().splitlines()
        text = stderr[-1] if stderr else (msg or "failed")
        if result.get("cmd"):
            cmd = result["cmd"]
            text = f"{' '.join(cmd) if isinstance(cmd, list) else cmd}: {text}"
    # A module that failed on an exception says why only in the traceback's last line.
    exc = result.get("exception")
    if isinstance(exc, str) and exc.strip():
        last = exc.strip().splitlines()[-1]
        if last not in str(text):
            text = f"{text}: {last}"
    # Ansible's own wording for SSH failures carries the useful part after the prefix.
    text = re.sub(r"^Failed to connect to the host via ssh: ", "ssh: ", str(text))
    return _one_line(text)


class CallbackModule(CallbackBase):  # type: ignore[misc]
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "demuxlab_summary"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self.problems: dict[str, tuple[str, str]] = {}

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        if ignore_errors:
            return
        self.problems[result._host.get_name()] = ("FAILED", _problem(result._result))

    def v2_runner_on_unreachable(self, result: Any) -> None:
        text = re.sub(
            r"^Data could not be sent to remote host \"[^\"]*\"\. Make sure this host can be reached over ssh: ",
            "",
            _problem(result._result),
        )
        if not text.startswith("ssh: "):
            text = f"ssh: {text}"
        self.problems[result._host.get_name()] = ("UNREACHABLE", text)

    def v2_playbook_on_stats(self, stats: Any) -> None:
        for host in sorted(self.problems):
            kind, text = self.problems[host]
            self._display.display(f"demuxlab: {kind} {host}: {text}", stderr=True)
