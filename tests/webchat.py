"""The web chat's end-to-end tests' machinery: the stand-in model (``StandIn`` over
``FakeServer``: the OpenAI wire format, streamed at a chosen pace), ``clawd serve`` as a real
process on an ephemeral port of 127.0.0.1, and the system's Chromium through Playwright
(its own browser download is never used)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from conftest import write_local_config
from fakeserver import Request, Response, openai_chunks, openai_completion
from gateway_client import free_port, start_serve

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"  # screenshots; ignored by git
TOKEN = "web-chat-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

Answer = Callable[[dict[str, Any], str], "str | list[dict[str, Any]] | Response"]


def last_user_text(body: dict[str, Any]) -> str:
    """The text of the last user message of a Chat Completions request."""
    for message in reversed(body.get("messages", [])):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            return "".join(p.get("text", "") for p in content if isinstance(p, dict))
        return str(content or "")
    return ""


@dataclass
class StandIn:
    """What the stand-in model answers. By default ``echo: <the user's words>``; a test sets
    ``answer`` (the request's body and the user's text to a reply's text, to tool calls, or
    to a whole ``Response``) and ``delay`` (seconds before each streamed chunk)."""

    answer: Answer | None = None
    delay: float = 0.0
    chunk: int = 6
    prompt_tokens: int = 3000  # reported as the request's size: the context meter shows it
    seen: list[str] = field(default_factory=list)

    def reset(self) -> None:
        self.answer, self.delay, self.chunk = None, 0.0, 6
        self.seen.clear()

    def __call__(self, request: Request) -> Response:
        body = request.json()
        text = last_user_text(body)
        self.seen.append(text)
        words = text.rsplit("\n", 1)[-1].strip()  # the message (after any recalled notes)
        result = self.answer(body, words) if self.answer else f"echo: {words}"
        if isinstance(result, Response):
            return result
        calls = result if isinstance(result, list) else None
        reply = "" if calls else str(result)
        if not body.get("stream"):
            return openai_completion(reply, calls, usage={"prompt_tokens": self.prompt_tokens})
        chunks = openai_chunks(reply, calls, chunk=self.chunk,
                               usage={"prompt_tokens": self.prompt_tokens})
        delay = self.delay

        def paced():
            for piece in chunks:
                if delay:
                    time.sleep(delay)
                yield piece
        return Response(200, paced(), {"content-type": "text/event-stream"})


@dataclass
class Served:
    """``clawd serve`` as a process: its URL, its state, and the process; with
    ``storage_url``, two workers on that database."""

    url: str
    home: Path
    process: subprocess.Popen
    env: dict[str, str]
    storage_url: str | None = None

    def storage(self, agent: str = "main") -> Any:
        """What the server keeps of ``agent``: its files, or its database rows."""
        if self.storage_url:
            from clawd.storage.postgres import database

            return database(self.storage_url).agent(agent)
        from clawd.storage.files.storage import FileStorage

        workspace = self.home / ("ws" if agent == "main" else f"ws-{agent}")
        return FileStorage(agent, workspace, self.home / ".clawd" / "agents" / agent /
                           "sessions")

    def said(self, agent: str) -> str:
        """Every transcript of ``agent``, as one text."""
        storage = self.storage(agent)
        return "\n".join(json.dumps(entry) for sid in storage.session_ids()
                         for entry in storage.transcript(sid).load(quiet=True).entries)

    def api(self, method: str, path: str, headers: dict[str, str] | None = None,
            **kw: Any) -> httpx.Response:
        return httpx.request(method, self.url + path, headers={**AUTH, **(headers or {})},
                             timeout=30, **kw)

    def transcript(self, key: str = "agent:main:main") -> list[dict[str, Any]]:
        """The message lines of the session's transcript, as the server stored them."""
        storage = self.storage(key.split(":")[1])
        entry = storage.sessions.get(key)
        lines = storage.transcript(entry["sessionId"]).load(quiet=True).entries
        return [line for line in lines if line.get("type") == "message"]

    def stop(self) -> str:
        import psutil

        workers = psutil.Process(self.process.pid).children()
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            for worker in workers:  # a worker left behind keeps the pipe open: say so
                with contextlib.suppress(psutil.Error):
                    worker.kill()
            self.process.kill()
            return self.process.communicate()[1] + "\nTraceback: clawd serve did not stop"
        return self.process.communicate()[1]


def serve(home: Path, model_url: str, storage_url: str | None = None) -> Served:
    """``clawd serve`` over the stand-in model at ``model_url``, with its state in ``home``:
    two agents, ``main`` (the default) and ``work``; with ``storage_url``, two workers
    keeping everything in that database."""
    home.mkdir(parents=True, exist_ok=True)
    write_local_config(home, model_url)
    config_path = home / ".clawd" / "clawd.json"
    config = json.loads(config_path.read_text())
    port = free_port()
    config["gateway"] = {"port": port, "shutdownGraceSeconds": 1}
    (home / "ws-work" / "memory").mkdir(parents=True, exist_ok=True)
    config["agents"]["list"] = [{"id": "main", "default": True},
                                {"id": "work", "workspace": str(home / "ws-work")}]
    config_path.write_text(json.dumps(config))
    env = {**os.environ, "HOME": str(home), "CLAWD_HOME": str(home / ".clawd"),
           "CLAWD_GATEWAY_TOKEN": TOKEN}
    env.pop("CLAWD_CONFIG", None)
    if storage_url:
        env["CLAWD_STORAGE_URL"] = storage_url
    child, url = start_serve(env, port, ["--workers", "2"] if storage_url else None)
    return Served(url, home, child, env, storage_url)


def launch(playwright: Any, home: Path) -> Any:
    """The system's Chromium, headless, with ``home`` as its HOME (a fresh profile, kept out
    of the user's)."""
    home.mkdir(parents=True, exist_ok=True)
    return playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                      args=CHROMIUM_ARGS, timeout=30_000,
                                      env={**os.environ, "HOME": str(home)})


def shot(page: Any, name: str) -> Path:
    """A screenshot of ``page`` kept in tests/artifacts/ (the whole page)."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def clear_artifacts() -> None:
    if ARTIFACTS.exists():
        shutil.rmtree(ARTIFACTS)


DESKTOP = {"width": 1200, "height": 800}
PHONE = {"width": 390, "height": 844}


class WebChat:
    """Pages of the web chat in the browser, each in a fresh context unless given one;
    ``close`` closes them and returns the JavaScript errors they raised."""

    def __init__(self, browser: Any, served: Served):
        self.browser, self.served = browser, served
        self.contexts: list[Any] = []
        self.errors: list[str] = []

    def context(self, viewport: dict[str, int] | None = None, **kw: Any) -> Any:
        context = self.browser.new_context(viewport=viewport or DESKTOP, **kw)
        self.contexts.append(context)
        return context

    def page(self, session: str | None = None, *, context: Any = None, sign_in: bool = True,
             **kw: Any) -> Any:
        """A page signed in (with a one-time ``#token=`` fragment) and, if given, on the
        session ``session``."""
        page = (context or self.context(**kw)).new_page()
        page.set_default_timeout(15_000)
        watch(page, self.errors)
        if sign_in:
            page.goto(f"{self.served.url}/#token={TOKEN}")
            page.wait_for_selector("#app:not([hidden])")
            idle(page)
        else:
            page.goto(f"{self.served.url}/")
        if session:
            open_session(page, session)
        return page

    def close(self) -> list[str]:
        for context in self.contexts:
            context.close()
        return self.errors


def watch(page: Any, errors: list[str]) -> None:
    """Collect the page's JavaScript errors and anything its Content-Security-Policy
    blocked."""
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda message: errors.append(message.text)
            if "Content Security Policy" in message.text else None)


def idle(page: Any) -> None:
    """Wait until no turn is shown streaming and the history has been read."""
    page.wait_for_selector("#log[aria-busy=false]", state="attached")


def open_session(page: Any, name: str) -> None:
    page.fill("#open-name", name)
    page.press("#open-name", "Enter")
    page.wait_for_function(f"() => document.getElementById('title').textContent === "
                           f"{json.dumps(name)}")
    idle(page)


def send(page: Any, text: str) -> None:
    page.fill("#input", text)
    page.click("#send")


def texts(page: Any, selector: str) -> list[str]:
    return page.eval_on_selector_all(selector, "nodes => nodes.map(n => n.textContent)")
