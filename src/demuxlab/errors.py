"""User-facing errors.

Anything a user can cause (a bad spec, an unknown name, an unreachable database, a missing binary) is
raised as :class:`DemuxlabError` with a one-line message that names the file, field and value. The CLI
prints it as ``demuxlab: error: <message>`` and exits with :attr:`DemuxlabError.exit_code`; no traceback.
"""

from __future__ import annotations


class DemuxlabError(Exception):
    """An error caused by input or environment, reported to the user in one line."""

    exit_code: int = 2

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class SpecError(DemuxlabError):
    """An experiment spec is invalid; the message reads ``file: field: problem``."""


class ConfigError(DemuxlabError):
    """An option, environment variable or config file holds a bad value."""


class LaunchError(DemuxlabError):
    """A run could not be started or failed (missing binary, port in use, server crashed)."""

    exit_code = 1


class DatabaseError(DemuxlabError):
    """The database is unreachable or refused an operation."""

    exit_code = 1
