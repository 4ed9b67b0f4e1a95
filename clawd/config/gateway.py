"""The ``gateway`` section of the config: what ``clawd serve`` listens on and who may use it.

OpenClaw's names where it has them (``gateway.port``, ``gateway.bind``, ``gateway.auth.mode``,
``gateway.auth.token``, ``gateway.http.endpoints.chatCompletions.enabled``); the rest are
clawd's own and documented in docs/gateway.md. ``auth.tokens`` adds tokens limited to some
agents (``{token, agents}``); ``auth.token`` (or ``CLAWD_GATEWAY_TOKEN``) reaches every
agent the server serves. ``token_weakness`` says why a token is no secret (too short, or
too little variety); ``trustedProxies`` names the reverse proxies whose ``X-Forwarded-For``
is believed (none by default); ``quotas`` bounds what each person may do (turns, sessions,
the size of a write).
"""

from __future__ import annotations

import ipaddress
import math
import string
from typing import Literal

from pydantic import Field, field_validator, model_validator

from clawd.config.sections import Bool, Float, Int, Model

DEFAULT_PORT = 18789
MIN_TOKEN_CHARS = 16
# the least estimated strength of a token, in bits: 16 random letters and digits have ~80,
# a 43-character ``secrets.token_urlsafe(32)`` ~250; a word, a date or "aaaa…" far fewer
MIN_TOKEN_BITS = 60
_CLASSES = (string.digits, string.ascii_lowercase, string.ascii_uppercase)


def token_bits(token: str) -> float:
    """A rough strength of ``token`` in bits: each character not predictable from the ones
    before it (a repeat, the next step of a run such as ``0123`` or ``aceg``, or a
    three-character piece seen earlier, as in ``abcabc``) counts log2 of the alphabet its
    character classes span (digits 10, lowercase 26, uppercase 26, anything else 33)."""
    pool = sum(len(c) for c in _CLASSES if any(ch in c for ch in token))
    if any(not any(ch in c for c in _CLASSES) for ch in token):
        pool += 33
    free, seen, step = 0, set(), None
    for i, ch in enumerate(token):
        diff = ord(ch) - ord(token[i - 1]) if i else None
        piece = token[i - 2:i + 1] if i >= 2 else ""
        predictable = diff == 0 or (diff is not None and diff == step and abs(diff) <= 2) \
            or piece in seen
        free += 0 if predictable else 1
        step = diff
        if piece:
            seen.add(piece)
    return free * math.log2(max(pool, 2))


def token_weakness(token: str) -> str | None:
    """Why ``token`` is no secret, or None when it will do."""
    if len(token) < MIN_TOKEN_CHARS:
        return (f"is {len(token)} character{'s' if len(token) != 1 else ''} long; a token "
                f"needs at least {MIN_TOKEN_CHARS}")
    if token_bits(token) < MIN_TOKEN_BITS:
        return ("has too little variety to be a secret (repeated, sequential or few kinds "
                "of characters)")
    return None


def _strong(token: str | None) -> str | None:
    if token is not None and (why := token_weakness(token)):
        raise ValueError(f"the token {why}; make one with: clawd serve --new-token")
    return token


class ScopedToken(Model):
    """A bearer token that reaches only the agents listed."""

    token: str
    agents: list[str] = Field(min_length=1)

    _token = field_validator("token")(classmethod(lambda cls, v: _strong(v)))


class RateLimit(Model):
    """Failed authentication per client address: past ``maxAttempts`` failures within
    ``windowSeconds`` every request from it is answered 429 for ``lockoutSeconds``."""

    max_attempts: Int = Field(10, ge=1)
    window_seconds: Float = Field(60, gt=0)
    lockout_seconds: Float = Field(300, gt=0)


class Auth(Model):
    mode: Literal["token", "none"] = "token"
    token: str | None = None
    tokens: list[ScopedToken] = []
    rate_limit: RateLimit = RateLimit()

    _token = field_validator("token")(classmethod(lambda cls, v: _strong(v)))


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


class Quotas(Model):
    """What one person (``clawd users``) may do through the gateway; ``null``: no limit.
    The operator's token (and ``auth.tokens``) is limited only with ``operator: true``."""

    turns_per_minute: Int | None = Field(30, ge=1)  # turns started in any 60 s
    turns_at_once: Int | None = Field(4, ge=1)  # turns running or waiting, every worker
    sessions: Int | None = Field(1000, ge=1)  # sessions of their agent
    note_bytes: Int | None = Field(65_536, ge=1)  # one write of MEMORY.md or memory/**.md
    file_bytes: Int | None = Field(1_000_000, ge=1)  # one write of any other file
    operator: Bool = False


class Gateway(Model):
    port: Int = Field(DEFAULT_PORT, ge=1, le=65535)
    bind: str = "loopback"  # "loopback" or an address
    auth: Auth = Auth()
    http: Http = Http()
    cors: Cors = Cors()
    # DNS names the gateway answers to besides localhost and IP addresses (DNS rebinding)
    allowed_hosts: list[str] = []
    # reverse proxies (addresses or networks) whose X-Forwarded-For / -Proto are believed
    trusted_proxies: list[str] = []
    max_body_bytes: Int = Field(1_000_000, ge=1024)
    max_queued_per_session: Int = Field(8, ge=0)
    # on SIGTERM, how long running turns may go on before they are stopped as Ctrl-C does
    shutdown_grace_seconds: Float = Field(10, ge=0)
    # an idle session's files and lock are let go after this long without a turn
    idle_session_seconds: Float = Field(60, ge=0)
    quotas: Quotas = Quotas()

    @field_validator("allowed_hosts")
    @classmethod
    def _hosts(cls, value: list[str]) -> list[str]:
        return [host.strip().lower() for host in value if host.strip()]

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies(cls, value: list[str]) -> list[str]:
        for entry in value:
            try:
                ipaddress.ip_network(entry.strip(), strict=False)
            except ValueError:
                raise ValueError(f"{entry!r} is not an address or network (e.g. "
                                 f"\"127.0.0.1\" or \"10.0.0.0/8\")") from None
        return [entry.strip() for entry in value]

    @model_validator(mode="after")
    def _bind(self) -> Gateway:
        if not self.bind.strip():
            raise ValueError("bind must be \"loopback\" or an address such as 0.0.0.0")
        return self
