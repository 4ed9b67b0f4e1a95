"""``clawd serve``: the gateway on uvicorn, its token, and a clean stop on SIGTERM.

The token is ``CLAWD_GATEWAY_TOKEN``, else ``gateway.auth.token``; on loopback without
either, one is made once and kept in ``<state>/gateway-token`` (readable by you only), so
``clawd serve`` works out of the box and the token is never printed or logged (the line at
start-up names the file). Beyond loopback a configured token is required (``policy``).
SIGTERM or Ctrl-C: no new turns, running ones get ``gateway.shutdownGraceSeconds`` and are
then stopped as Ctrl-C stops them (their partial replies kept), every session closed.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from clawd.config import Config
from clawd.frontends.gateway.policy import ENV_TOKEN, bind_host, check_bind, is_loopback

log = logging.getLogger(__name__)
TOKEN_FILE = "gateway-token"


def configured_token(config: Config) -> str | None:
    """``CLAWD_GATEWAY_TOKEN``, else ``gateway.auth.token``."""
    return os.environ.get(ENV_TOKEN, "").strip() or config.gateway.auth.token


def local_token(state: Path) -> tuple[str, Path]:
    """The token kept in ``<state>/gateway-token``, made on first use (mode 0600)."""
    path = state / TOKEN_FILE
    if path.is_file():
        token = path.read_text(encoding="utf-8").strip()
        if len(token) >= 16:
            return token, path
    state.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    return token, path


def cmd_serve(args: argparse.Namespace) -> int:
    from clawd.config import load_config, state_dir
    from clawd.frontends.gateway.agents import Agents
    from clawd.frontends.gateway.app import create_app

    config = load_config()
    gateway = config.gateway
    host = bind_host(gateway, args.host)
    port = args.port if args.port is not None else gateway.port
    token = configured_token(config)
    check_bind(host, gateway, token)
    where = "the config or the environment"
    if gateway.auth.mode == "token" and not token and not gateway.auth.tokens:
        token, path = local_token(state_dir())
        where = str(path)
    agents = Agents.of_config(config, args.agent)
    app = create_app(config, agents, token if gateway.auth.mode == "token" else None)
    auth = ("no token (gateway.auth.mode none)" if gateway.auth.mode == "none"
            else f"bearer token from {where}")
    print(f"clawd serve: http://{_url_host(host)}:{port} · agents {', '.join(agents.ids)} · "
          f"{auth}" + ("" if is_loopback(host) else " · reachable beyond this machine"),
          file=sys.stderr, flush=True)
    run(app, host, port)
    return 0


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def run(app: Any, host: str, port: int) -> None:
    """Serve ``app`` until SIGTERM or Ctrl-C."""
    server(app, host, port).run()


def server(app: Any, host: str, port: int) -> Any:
    """A uvicorn server for ``app`` whose first SIGTERM or Ctrl-C also tells the ``Hub`` to
    stop (no new turns; the grace period starts). ``ready`` is set once it listens, and
    ``port`` says where (``port`` 0: an ephemeral one, for tests and benchmarks)."""
    import asyncio
    import threading

    import uvicorn

    class Server(uvicorn.Server):
        ready = threading.Event()
        _loop: asyncio.AbstractEventLoop | None = None

        def handle_exit(self, sig: int, frame: Any) -> None:
            if self._loop is not None:
                self._loop.call_soon_threadsafe(app.state.gateway.hub.begin_stop)
            super().handle_exit(sig, frame)

        async def startup(self, sockets: Any = None) -> None:
            self._loop = asyncio.get_running_loop()
            await super().startup(sockets)
            self.ready.set()

        @property
        def port(self) -> int:
            return int(self.servers[0].sockets[0].getsockname()[1])

    config = uvicorn.Config(app, host=host, port=port, log_level="warning",
                            access_log=False, lifespan="on",
                            timeout_graceful_shutdown=None)
    return Server(config)
