"""Who may call the gateway, and from where: pure checks, no I/O.

``bind_host`` turns ``gateway.bind`` into an address and ``check_bind`` refuses to listen
beyond loopback without a token; ``AcceptedTokens`` answers which agents a bearer token reaches
(compared with ``hmac.compare_digest``, never logged); ``host_allowed`` refuses a ``Host``
header naming a DNS name the gateway was not told about (DNS rebinding); ``origin_allowed``
lets a state-changing request from a browser through only from the gateway's own origin or
a configured one; ``needs_no_token`` names the paths open without a token (the health
and readiness checks, the web chat's files); ``client_address`` is the address a request
came from (the peer, or what a trusted proxy says in ``X-Forwarded-For``). Wrong tokens are
counted per ``sign_ins.rate_key`` of that address by the hub's coordination
(``frontends.hub.sign_ins``).
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from clawd.config.gateway import Gateway, token_weakness
from clawd.core.errors import ConfigError
from clawd.frontends.hub.sign_ins import address_in

LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost"})
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
ENV_TOKEN = "CLAWD_GATEWAY_TOKEN"
OPEN_PATHS = frozenset({"/health", "/ready", "/"})  # liveness, readiness, the web chat's page
PAGE_FILES = "/ui/"  # the page's CSS and JavaScript: /ui/<name>


def bind_host(gateway: Gateway, host: str | None = None) -> str:
    """The address to listen on: ``--host``, else ``gateway.bind`` ("loopback": 127.0.0.1)."""
    chosen = (host or gateway.bind).strip()
    return "127.0.0.1" if chosen.lower() == "loopback" else chosen


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is reachable from this machine only."""
    name = host.strip().strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_bind(host: str, gateway: Gateway, token: str | None) -> None:
    """Refuse, in one line, to listen beyond loopback without a configured token."""
    if is_loopback(host):
        return
    if gateway.auth.mode == "none":
        raise ConfigError(f"gateway.auth.mode is \"none\": clawd serve listens on loopback "
                          f"only without a token, not on {host}; set gateway.auth.token (or "
                          f"{ENV_TOKEN}) and mode \"token\"")
    if not token and not gateway.auth.tokens:
        raise ConfigError(f"clawd serve needs a token to listen on {host} (beyond this "
                          f"machine): set gateway.auth.token or {ENV_TOKEN} (make one with "
                          f"clawd serve --new-token)")


def check_token(token: str, where: str) -> None:
    """Refuse, in one line, a token that is no secret (``token_weakness``)."""
    if why := token_weakness(token):
        raise ConfigError(f"the token in {where} {why}; make one with: clawd serve --new-token")


@dataclass(frozen=True)
class AcceptedTokens:
    """The bearer tokens the gateway accepts and the agents each reaches (None: all)."""

    entries: tuple[tuple[bytes, frozenset[str] | None], ...] = ()
    required: bool = True
    people: Any = None  # ``storage.people.People``: their tokens reach their own agents

    @classmethod
    def of(cls, gateway: Gateway, token: str | None, people: Any = None) -> AcceptedTokens:
        """``token``: the unscoped one (``gateway.auth.token`` or the environment);
        ``people``: the people of this clawd (``clawd users``)."""
        entries: list[tuple[bytes, frozenset[str] | None]] = []
        if token:
            entries.append((token.encode(), None))
        for scoped in gateway.auth.tokens:
            entries.append((scoped.token.encode(),
                            frozenset(agent.lower() for agent in scoped.agents)))
        return cls(tuple(entries), gateway.auth.mode == "token", people)

    def agents(self, header: str | None) -> frozenset[str] | None | bool:
        """What the ``Authorization`` header reaches: ``None`` every agent, a set some of
        them, ``False`` nothing (missing or wrong). Every token is compared, in constant
        time, so the time taken says nothing about which one came close."""
        return self.who(header)[0]

    def who(self, header: str | None) -> tuple[frozenset[str] | None | bool, str | None]:
        """``agents`` and the name of the person (``clawd users``) whose token it is (None:
        the operator's, or one of ``gateway.auth.tokens``)."""
        if not self.required:
            return None, None
        given = bearer(header)
        if given is None:
            return False, None
        found: frozenset[str] | None | bool = False
        for secret, agents in self.entries:
            if hmac.compare_digest(secret, given) and found is False:
                found = agents
        if found is False and self.people is not None:
            person = self.people.find(given)
            if person is not None:
                return frozenset(agent.lower() for agent in person.agents), person.name
        return found, None


def bearer(header: str | None) -> bytes | None:
    """The token of an ``Authorization: Bearer TOKEN`` header."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip().encode("utf-8", "replace")


def needs_no_token(path: str) -> bool:
    """Whether ``path`` is served without a token: ``/health``, ``/ready`` and the web
    chat's files (which hold no secret)."""
    if path in OPEN_PATHS:
        return True
    name = path[len(PAGE_FILES):] if path.startswith(PAGE_FILES) else ""
    return bool(name) and "/" not in name


def host_name(header: str) -> str:
    """The name in a ``Host`` header, without its port (``[::1]:8080`` is ``::1``)."""
    text = header.strip().lower()
    if text.startswith("["):
        return text[1:].partition("]")[0]
    if text.count(":") == 1:
        return text.partition(":")[0]
    return text


def host_allowed(header: str | None, allowed: Iterable[str]) -> bool:
    """Whether a request's ``Host`` is one the gateway serves: an IP address (no DNS name
    to rebind), localhost, or a name in ``gateway.allowedHosts``."""
    if not header:
        return False
    name = host_name(header)
    if not name:
        return False
    if name in LOOPBACK_NAMES or name in set(allowed):
        return True
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


def origin_allowed(method: str, origin: str | None, host: str | None, scheme: str,
                   extra: Iterable[str]) -> bool:
    """Whether a request may change state given its ``Origin``: requests that do not change
    state, and clients that send no ``Origin`` (not a browser), pass; a browser's must be
    the gateway's own origin (the scheme and ``Host`` it was reached at) or a configured
    one (``gateway.cors.origins``)."""
    if method.upper() not in STATE_CHANGING or origin is None:
        return True
    given = origin.strip().rstrip("/").lower()
    own = f"{scheme}://{(host or '').strip().lower()}"
    return given == own or given in set(extra)


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def networks(entries: Iterable[str]) -> tuple[Network, ...]:
    """``gateway.trustedProxies`` as networks (an address is a network of one)."""
    return tuple(ipaddress.ip_network(entry, strict=False) for entry in entries)


def _trusted(address: str | ipaddress.IPv4Address | ipaddress.IPv6Address | None,
             trusted: Sequence[Network]) -> bool:
    found = address_in(address) if isinstance(address, str) else address
    return found is not None and any(found in network for network in trusted)


def client_address(peer: str, forwarded: str | None, trusted: Sequence[Network]) -> str:
    """The address a request came from. The peer, unless the peer is a trusted proxy: then
    the nearest hop of ``X-Forwarded-For`` (read from the right) that is not a trusted
    proxy too. From any other peer the header is ignored: anybody can write it."""
    if not forwarded or not _trusted(peer, trusted):
        return peer
    found = peer
    for hop in reversed(forwarded.split(",")):
        address = address_in(hop)
        if address is None:
            break  # a hop no proxy of ours wrote: believe nothing left of it
        found = str(address)
        if not _trusted(address, trusted):
            break
    return found


def forwarded_scheme(peer: str, header: str | None, scheme: str,
                     trusted: Sequence[Network]) -> str:
    """The scheme the client used: a trusted proxy's ``X-Forwarded-Proto``, else ours."""
    if header and _trusted(peer, trusted):
        given = header.split(",")[0].strip().lower()
        if given in ("http", "https"):
            return given
    return scheme
