"""Errors the CLI turns into one clear line and exit code 2 (no traceback)."""

from __future__ import annotations


class HorusInputError(Exception):
    """Bad user input: a trace, cluster spec, model file, config or API request.

    The message must be one line naming the source (file, line/field) and what was expected,
    e.g. ``trace.csv line 12, field 'num_gpus': expected a positive integer, got 'x'``.
    """

    def __init__(self, source: str, message: str) -> None:
        self.source = source
        self.message = message
        super().__init__(f"{source}: {message}")


class OracleAccessError(RuntimeError):
    """A non-oracle policy tried to read the simulator's ground truth."""


class UnknownAgentError(LookupError):
    """A heartbeat from an agent the server does not consider alive: it must register again."""
