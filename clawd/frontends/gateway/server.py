"""``clawd serve``: the gateway on uvicorn, its token, and a clean stop on SIGTERM.

The token is ``CLAWD_GATEWAY_TOKEN``, else ``gateway.auth.token``; one that is no secret
(``token_weakness``) is refused at start. On loopback without either, one is made once and
kept in ``<state>/gateway-token`` (created readable by you only, in one step, never
rewritten; a token file others may read is refused with the ``chmod`` to run), so ``clawd
serve`` works out of the box and the token is never printed or logged (the line at start-up
names the file). Beyond loopback a configured token is required (``policy``). ``clawd serve
--new-token`` prints a fresh token and exits.

SIGTERM or Ctrl-C: the server keeps listening while running turns finish, answering every
new turn (and ``/health``) 503; running turns get ``gateway.shutdownGraceSeconds`` and are
then stopped as Ctrl-C stops them (their partial replies kept); then it stops listening and
every session is closed. A second signal stops at once.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import secrets
import signal
import stat
import sys
from pathlib import Path
from typing import Any

from clawd.config import Config
from clawd.core.errors import ConfigError
from clawd.frontends.gateway.policy import (
    ENV_TOKEN,
    bind_host,
    check_bind,
    check_token,
    is_loopback,
)
from clawd.sessions import lock

log = logging.getLogger(__name__)
# what stops the server: Ctrl-C, SIGTERM, and Ctrl-Break on Windows
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGBREAK")
                     if hasattr(signal, name))
TOKEN_FILE = "gateway-token"


def configured_token(config: Config) -> str | None:
    """``CLAWD_GATEWAY_TOKEN``, else ``gateway.auth.token``."""
    return os.environ.get(ENV_TOKEN, "").strip() or config.gateway.auth.token


def new_token() -> str:
    """A fresh token: 32 random bytes, URL-safe (43 characters)."""
    return secrets.token_urlsafe(32)


def local_token(state: Path) -> tuple[str, Path]:
    """The token kept in ``<state>/gateway-token``, made on first use (mode 0600, written
    whole under another name and linked into place, so no reader ever sees half a token and
    two starts at once agree on one). A file others may read or write, or one holding a
    weak token, is refused in one line, never reused or rewritten."""
    path = state / TOKEN_FILE
    try:
        return _read_token(path), path
    except FileNotFoundError:
        pass
    state.mkdir(parents=True, exist_ok=True)
    spare = path.with_name(f".{TOKEN_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(spare, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(new_token() + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileExistsError):  # another start made one first: use it
            os.link(spare, path)
    finally:
        spare.unlink(missing_ok=True)
    return _read_token(path), path


def _read_token(path: Path) -> str:
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{path} is not a regular file; remove it and clawd serve makes "
                          f"a new token there")
    if info.st_mode & 0o077:
        raise ConfigError(f"{path} may be read by others (mode {info.st_mode & 0o777:o}); "
                          f"run: chmod 600 {path}")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise ConfigError(f"{path} belongs to another user; remove it and clawd serve makes "
                          f"a new token there")
    token = path.read_text(encoding="utf-8").strip()
    check_token(token, str(path))
    return token


def cmd_serve(args: argparse.Namespace) -> int:
    from clawd.config import load_config, state_dir
    from clawd.frontends.gateway.agents import ServedAgents
    from clawd.frontends.gateway.app import create_app

    if getattr(args, "new_token", False):
        print(new_token())
        return 0
    config = load_config()
    gateway = config.gateway
    host = bind_host(gateway, args.host)
    port = args.port if args.port is not None else gateway.port
    token = configured_token(config)
    if token and os.environ.get(ENV_TOKEN, "").strip():
        check_token(token, ENV_TOKEN)  # the config's own tokens were checked as it loaded
    check_bind(host, gateway, token)
    where = "the config or the environment"
    if gateway.auth.mode == "token" and not token and not gateway.auth.tokens:
        token, path = local_token(state_dir())
        where = str(path)
    auth = ("no token (gateway.auth.mode none)" if gateway.auth.mode == "none"
            else f"bearer token from {where}")
    url = f"http://{_url_host(host)}:{port}"
    openai = (f" · OpenAI endpoint {url}/v1" if gateway.http.endpoints.chat_completions.enabled
              else "")
    count = getattr(args, "workers", None) or 1
    if count > 1 and not config.storage.effective_url():
        raise ConfigError("--workers: several workers share sessions through a database; set "
                          "storage.url (or CLAWD_STORAGE_URL), see docs/hosting.md")
    scoped = token if gateway.auth.mode == "token" else None

    def started(ids: list[str]) -> None:
        print(f"clawd serve: {url} · agents {', '.join(ids)} · {auth}{openai}"
              + (f" · {count} workers" if count > 1 else "")
              + ("" if is_loopback(host) else " · reachable beyond this machine"),
              file=sys.stderr, flush=True)

    def serve(sock: Any = None) -> int:
        agents = ServedAgents.of_config(config, args.agent)
        app = create_app(config, agents, scoped)
        if sock is None:
            started(agents.ids)
        from clawd.frontends.gateway.ops import count_log_messages, show_requests

        show_requests()  # a line per request
        count_log_messages()
        lock.HOLDER = f"clawd serve ({url})"  # what a CLI waiting for a session is told
        server(app, host, port).run(sockets=[sock] if sock is not None else None)
        return 0

    if count == 1:
        return serve()
    from clawd.frontends.gateway.workers import listen, supervise

    sock = listen(host, port)  # bound before the workers fork: each accepts on it
    started([args.agent] if args.agent else config.agent_ids())
    return supervise(count, sock, serve)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def run(app: Any, host: str, port: int) -> None:
    """Serve ``app`` until SIGTERM or Ctrl-C."""
    server(app, host, port).run()


def server(app: Any, host: str, port: int) -> Any:
    """A uvicorn server for ``app`` whose first SIGTERM or Ctrl-C tells the ``Hub`` to stop
    (no new turns, answered 503; the grace period starts) and stops listening only once no
    turn runs; a second signal stops at once. ``ready`` is set once it listens, and
    ``port`` says where (``port`` 0: an ephemeral one, for tests and benchmarks).
    Forwarded headers are the ``Gatekeeper``'s to read (``gateway.trustedProxies``): uvicorn's
    own reading, which believes any local peer, is off."""
    import asyncio
    import threading
    from collections.abc import Iterator

    import uvicorn

    hub = app.state.gateway.hub

    class Server(uvicorn.Server):
        ready = threading.Event()
        _loop: asyncio.AbstractEventLoop | None = None
        _draining = False

        def __init__(self, config: uvicorn.Config) -> None:
            super().__init__(config)
            self.caught: list[int] = []  # the stopping signals, in the order they came

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            """While it serves (from the main thread only, where signals arrive), SIGTERM and
            Ctrl-C go to ``handle_exit``; once it has stopped, the handlers before are back
            and each signal caught is raised again, the last first, so the process ends
            as that signal asks (as uvicorn's own does). Overridden, so that the signals
            caught are this class's own list, not uvicorn's private one."""
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            before = {sig: signal.signal(sig, self.handle_exit) for sig in STOP_SIGNALS}
            try:
                yield
            finally:
                for sig, handler in before.items():
                    signal.signal(sig, handler)
            for sig in reversed(self.caught):
                signal.raise_signal(sig)

        def handle_exit(self, sig: int, frame: Any) -> None:
            self.caught.append(sig)
            if self._loop is None or self._draining or self.should_exit:
                self.should_exit = self.force_exit = True
                return
            self._draining = True
            self._loop.call_soon_threadsafe(self._drain)

        def _drain(self) -> None:
            hub.begin_stop()

            async def wait() -> None:
                await hub.idle()
                self.should_exit = True

            self._drainer = asyncio.get_running_loop().create_task(wait())

        async def startup(self, sockets: Any = None) -> None:
            self._loop = asyncio.get_running_loop()
            await super().startup(sockets)
            self.ready.set()

        @property
        def port(self) -> int:
            return int(self.servers[0].sockets[0].getsockname()[1])

    config = uvicorn.Config(app, host=host, port=port, log_level="warning",
                            access_log=False, lifespan="on", proxy_headers=False,
                            timeout_graceful_shutdown=None)
    return Server(config)
