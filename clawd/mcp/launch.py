"""What one configured server is given, and what of it is secret: pure functions, no SDK.

- ``resolve``: the server's settings with ``${NAME}`` (and ``${NAME:-default}``, as Claude
  Code writes them) replaced by clawd's environment variables in ``command``, ``args``,
  ``env``, ``url`` and ``headers``; a variable that is not set and has no default is an
  error naming it. Every value put in that way is a secret, as ``env`` and ``headers`` are.
- ``child_env``: a child's environment is narrow on purpose, so the keys clawd holds (its
  providers' API keys) never reach a server unasked: the SDK's short list (``PATH``,
  ``HOME``, ``USER``, ``SHELL``, ``TERM``, ...), the locale, time zone, proxy and
  certificate variables a server needs to reach the network, then ``env``. A variable of
  clawd's to pass on is named in ``env`` (``GITHUB_TOKEN: "${GITHUB_TOKEN}"``).
- ``shown_args``: a command line as ``clawd mcp list`` prints it: the value after an
  option named like a secret (``--api-key V``, ``--token=V``), a ``KEY=value`` whose key is
  one, and a URL's user and query, each as ``***``.
- ``scrub``: every secret in a text replaced by ``***``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from clawd.config.mcp import McpServer
from clawd.core.errors import ConfigError

# the SDK's own list (mcp.client.stdio.DEFAULT_INHERITED_ENV_VARS, POSIX), and what a
# server needs to speak and reach the network as clawd does
INHERITED = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER",
             "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR",
             "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
             "http_proxy", "https_proxy", "no_proxy", "all_proxy",
             "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_SECRET_WORD = re.compile(r"key|token|secret|passw|auth|credential|bearer", re.IGNORECASE)
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
MIN_SECRET = 4  # shorter values are not hidden: "***" everywhere would hide nothing


@dataclass(frozen=True)
class Launch:
    """A server's settings with the variables put in, and the values never to print."""

    command: str | None
    args: list[str]
    env: dict[str, str]
    url: str | None
    headers: dict[str, str]
    secrets: list[str]


def resolve(server: McpServer, environ: Mapping[str, str]) -> Launch:
    """``server`` with ``${NAME}`` replaced from ``environ`` (see the module docstring)."""
    found: list[str] = []

    def put(text: str, where: str) -> str:
        def one(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            value = environ.get(name, default)
            if value is None:
                raise ConfigError(f"{where}: ${{{name}}} is not set in clawd's environment "
                                  f"(or write ${{{name}:-default}})")
            found.append(value)
            return value
        return _VARIABLE.sub(one, text)

    env = {key: put(value, f"env {key}") for key, value in server.env.items()}
    headers = {key: put(value, f"headers {key}") for key, value in server.headers.items()}
    launch = Launch(
        command=put(server.command, "command") if server.command is not None else None,
        args=[put(arg, "args") for arg in server.args], env=env,
        url=put(server.url, "url") if server.url is not None else None, headers=headers,
        secrets=[])
    query = urlsplit(launch.url).query if launch.url else ""
    secrets = [*env.values(), *headers.values(), *found,
               *(pair.partition("=")[2] for pair in query.split("&"))]
    return Launch(launch.command, launch.args, env, launch.url, headers,
                  sorted({s for s in secrets if len(s) >= MIN_SECRET}, key=len, reverse=True))


def child_env(env: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of a server's child process (see the module docstring)."""
    passed = {key: environ[key] for key in INHERITED
              if key in environ and not environ[key].startswith("()")}
    return {**passed, **env}


def scrub(text: str, secrets: list[str]) -> str:
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def shown_url(url: str) -> str:
    """``url`` without its user and with each query value as ``***``."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    query = "&".join(f"{pair.partition('=')[0]}=***" if "=" in pair else pair
                     for pair in parts.query.split("&") if pair)
    return urlunsplit((parts.scheme, host, parts.path, query, ""))


def shown_args(args: list[str]) -> list[str]:
    """``args`` as they may be printed (see the module docstring)."""
    shown: list[str] = []
    hide_next = False
    for arg in args:
        if hide_next and not arg.startswith("-"):
            shown.append("***")
            hide_next = False
            continue
        hide_next = False
        name, sep, value = arg.partition("=")
        if _URL.match(arg):
            shown.append(shown_url(arg))
        elif sep and _URL.match(value):
            shown.append(f"{name}={shown_url(value)}")
        elif sep and value and _SECRET_WORD.search(name):
            shown.append(f"{name}=***")
        elif arg.startswith("-") and _SECRET_WORD.search(arg):
            shown.append(arg)
            hide_next = True
        else:
            shown.append(arg)
    return shown
