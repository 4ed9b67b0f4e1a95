"""The ``gateway`` section of the config: what ``clawd serve`` listens on and who may use it.

OpenClaw's names where it has them (``gateway.port``, ``gateway.bind``, ``gateway.auth.mode``,
``gateway.auth.token``, ``gateway.http.endpoints.chatCompletions.enabled``); the rest are
clawd's own and documented in docs/gateway.md. ``auth.tokens`` adds tokens limited to some
agents (``{token, agents}``); ``auth.token`` (or ``CLAWD_GATEWAY_TOKEN``) reaches every
agent the server serves.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from clawd.config.sections import Bool, Float, Int, Model

DEFAULT_PORT = 18789
MIN_TOKEN_CHARS = 16


class ScopedToken(Model):
    """A bearer token that reaches only the agents listed."""

    token: str = Field(min_length=MIN_TOKEN_CHARS)
    agents: list[str] = Field(min_length=1)


class RateLimit(Model):
    """Failed authentication per client address: past ``maxAttempts`` failures within
    ``windowSeconds`` every request from it is answered 429 for ``lockoutSeconds``."""

    max_attempts: Int = Field(10, ge=1)
    window_seconds: Float = Field(60, gt=0)
    lockout_seconds: Float = Field(300, gt=0)


class Auth(Model):
    mode: Literal["token", "none"] = "token"
    token: str | None = Field(None, min_length=MIN_TOKEN_CHARS)
    tokens: list[ScopedToken] = []
    rate_limit: RateLimit = RateLimit()


class ChatCompletions(Model):
    enabled: Bool = False


class Endpoints(Model):
    chat_completions: ChatCompletions = ChatCompletions()


class Http(Model):
    endpoints: Endpoints = Endpoints()


class Cors(Model):
    """Origins (``https://host[:port]``) whose pages may call the gateway; none by default."""

    origins: list[str] = []

    @field_validator("origins")
    @classmethod
    def _origins(cls, value: list[str]) -> list[str]:
        cleaned = []
        for origin in value:
            text = origin.strip().rstrip("/")
            scheme, sep, rest = text.partition("://")
            if not sep or scheme not in ("http", "https") or not rest or "/" in rest:
                raise ValueError(f"{origin!r} is not an origin (scheme://host[:port], e.g. "
                                 f"\"http://localhost:3000\")")
            cleaned.append(text.lower())
        return cleaned


class Gateway(Model):
    port: Int = Field(DEFAULT_PORT, ge=1, le=65535)
    bind: str = "loopback"  # "loopback" or an address
    auth: Auth = Auth()
    http: Http = Http()
    cors: Cors = Cors()
    # DNS names the gateway answers to besides localhost and IP addresses (DNS rebinding)
    allowed_hosts: list[str] = []
    max_body_bytes: Int = Field(1_000_000, ge=1024)
    max_queued_per_session: Int = Field(8, ge=0)
    # on SIGTERM, how long running turns may go on before they are stopped as Ctrl-C does
    shutdown_grace_seconds: Float = Field(10, ge=0)
    # an idle session's files and lock are let go after this long without a turn
    idle_session_seconds: Float = Field(60, ge=0)

    @field_validator("allowed_hosts")
    @classmethod
    def _hosts(cls, value: list[str]) -> list[str]:
        return [host.strip().lower() for host in value if host.strip()]

    @model_validator(mode="after")
    def _bind(self) -> Gateway:
        if not self.bind.strip():
            raise ValueError("bind must be \"loopback\" or an address such as 0.0.0.0")
        return self
