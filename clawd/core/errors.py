"""The error hierarchy: one root, ``ClawdError``, whose message is a one-line explanation.

Library code raises these; only the front ends turn them into exit codes and printed lines
(the gateway into HTTP answers, in words of its own where the line names a flag:
``http_message``).
Provider errors know whether a retry can help and whether the request overflowed the
model's context window, so the loop can decide between backing off and compacting.
"""

from __future__ import annotations


class ClawdError(Exception):
    """Base class of every error clawd reports to the user in one line. ``http``, when
    given, is that line in an HTTP client's words, for a line that names what only the
    command line has (``--session NAME``); the gateway answers with it."""

    def __init__(self, *args: object, http: str | None = None):
        super().__init__(*args)
        self.http = http


def http_message(exc: BaseException) -> str:
    """What an HTTP client is told of ``exc``: its ``http`` words, else its one line."""
    return getattr(exc, "http", None) or str(exc)


class ConfigError(ClawdError):
    """The config file is unreadable, malformed or names an unknown key."""


class SandboxError(ClawdError):
    """A path resolves outside the places a tool may touch."""


class ToolError(ClawdError):
    """A tool could not do what was asked; the message goes back to the model."""


class StoreUnavailable(ClawdError):
    """The database does not answer (down, restarting, unreachable); nothing was done and
    the same request can be made again in a moment."""

    retry_after = 5  # seconds, a client's next try


class ProviderError(ClawdError):
    """A model provider failed.

    ``retryable`` is true for rate limits, server errors and timeouts; ``overflow`` is true
    when the provider says the request does not fit the model's context window.
    """

    def __init__(self, message: str, *, retryable: bool = False, overflow: bool = False,
                 status: int | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.overflow = overflow
        self.status = status


class ContextOverflowError(ProviderError):
    """The request was larger than the model's context window."""

    def __init__(self, message: str, *, status: int | None = None):
        super().__init__(message, retryable=False, overflow=True, status=status)


class ProviderSetupError(ClawdError):
    """A provider cannot start: a missing API key, an unknown provider or model."""


class MissingKeyError(ProviderSetupError):
    """A built-in provider has no API key."""
