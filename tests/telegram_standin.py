"""A stand-in of Telegram's Bot API on 127.0.0.1, for tests: the real wire format, driven
through the real client library.

``BotApi`` serves ``/bot<token>/<method>`` (JSON or form bodies, as python-telegram-bot
sends them) and ``/file/bot<token>/<path>``: ``getMe``, ``getUpdates`` (from ``offset``,
confirming what came before it, waiting up to ``timeout`` seconds for something new),
``sendMessage``, ``editMessageText``, ``sendChatAction``, ``setMyCommands``, ``getFile``.
It refuses what Telegram refuses: a wrong token (401), a text over 4096 characters or empty,
HTML whose tags do not nest (400). ``throttle(method, seconds)`` answers the next call of
``method`` with a 429 and ``parameters.retry_after``. A test says what people send with
``dm`` / ``group`` / ``photo`` / ``voice`` (and changes one with ``edit``) and reads what
the bot did in ``sent``, ``edits``, ``actions`` and ``commands`` (``wait_sent`` waits for
them), and when in ``times``.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote

TOKEN = "123456:TEST-secret-token-abcdefghijklmnop"
BOT = {"id": 123456, "is_bot": True, "first_name": "Clawd", "username": "clawd_test_bot",
       "can_join_groups": True, "can_read_all_group_messages": False,
       "supports_inline_queries": False}
_TAG = re.compile(r"<(/?)([a-z-]+)(?:\s[^>]*)?>")
ALLOWED_TAGS = {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "code", "pre",
                "a", "blockquote", "tg-spoiler", "span"}


def html_problem(text: str) -> str | None:
    """Why Telegram would refuse ``text`` as HTML (None: it would take it)."""
    stack: list[str] = []
    for match in _TAG.finditer(text):
        closing, name = match.groups()
        if name not in ALLOWED_TAGS:
            return f"Unsupported start tag \"{name}\""
        if not closing:
            stack.append(name)
        elif not stack or stack.pop() != name:
            return f"Unexpected end tag \"{name}\""
    if stack:
        return f"Can't find end tag corresponding to start tag \"{stack[-1]}\""
    bare = _TAG.sub("", text)
    if "<" in bare or ">" in bare or re.search(r"&(?!(lt|gt|amp|quot|#\d+);)", bare):
        return "Unsupported character entity or an unescaped < > &"
    return None


class BotApi:
    """The stand-in (see the module docstring); a context manager that serves on a free
    port (``url``: what ``channels.telegram.apiRoot`` names)."""

    def __init__(self, token: str = TOKEN):
        self.token = token
        self.cond = threading.Condition()
        self.updates: list[dict[str, Any]] = []
        self.history: dict[int, dict[str, Any]] = {}  # every update ever queued
        self.next_update = 1
        self.confirmed = 0  # the highest offset a getUpdates sent
        self.sent: list[dict[str, Any]] = []
        self.edits: list[dict[str, Any]] = []
        self.actions: list[dict[str, Any]] = []
        self.commands: list[dict[str, Any]] = []
        self.calls: list[str] = []
        self.times: list[tuple[str, float]] = []  # each call's method, when it came
        self.files: dict[str, bytes] = {}
        self.throttled: dict[str, int] = {}
        self.message_ids: dict[str, int] = {}
        self.polls = 0
        self.polling_now = 0  # getUpdates calls open at this moment
        self.most_polling = 0  # the most ever open at once: 1 when one poller polls
        self.server = Quiet(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> BotApi:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        with self.cond:
            self.cond.notify_all()
        self.server.shutdown()
        self.server.server_close()

    # --- what people send ----------------------------------------------------------------

    def push(self, message: dict[str, Any], kind: str = "message") -> int:
        """Queue an update holding ``message`` (as ``kind``: ``message`` or
        ``edited_message``); its update_id."""
        with self.cond:
            update_id = self.next_update
            self.next_update += 1
            self.history[update_id] = {"update_id": update_id, kind: message}
            self.updates.append(self.history[update_id])
            self.cond.notify_all()
        return update_id

    def edit(self, update_id: int, text: str) -> int:
        """The person edits the message of update ``update_id`` to ``text``: an
        ``edited_message`` update (the same message id, an ``edit_date``); its update_id."""
        first = self.history[update_id]
        before = first.get("message") or first["edited_message"]
        sender = before["from"]
        extra = {k: before[k] for k in ("message_thread_id", "is_topic_message", "photo",
                                        "voice") if k in before}
        message = self.message(text, sender["id"], sender.get("username"),
                               chat=before["chat"], **extra)
        message.update(message_id=before["message_id"], date=before["date"],
                       edit_date=int(time.time()))
        return self.push(message, "edited_message")

    def push_again(self, update_id: int) -> None:
        """Deliver update ``update_id`` once more (as after a crash before confirming)."""
        with self.cond:
            self.updates.append(self.history[update_id])
            self.confirmed = min(self.confirmed, update_id)
            self.cond.notify_all()

    def dm(self, text: str, user: int = 1001, username: str | None = "ann", **more) -> int:
        return self.push(self.message(text, user, username, chat={"id": user,
                                                                  "type": "private"}, **more))

    def group(self, text: str, chat: int = -100500, user: int = 1001,
              username: str | None = "ann", thread: int | None = None, **more) -> int:
        extra = {"message_thread_id": thread, "is_topic_message": True} if thread else {}
        return self.push(self.message(text, user, username, chat={
            "id": chat, "type": "supergroup", "title": "Team", "is_forum": bool(thread)},
            **extra, **more))

    def photo(self, user: int = 1001, data: bytes = b"\x89PNG fake", caption: str = ""
              ) -> int:
        file_id = f"photo{len(self.files) + 1}"
        self.files[file_id] = data
        return self.push(self.message(caption, user, "ann", chat={"id": user,
                                                                  "type": "private"},
                                      photo=[{"file_id": file_id, "file_unique_id": file_id,
                                              "width": 90, "height": 90}]))

    def voice(self, user: int = 1001) -> int:
        return self.push(self.message("", user, "ann", chat={"id": user, "type": "private"},
                                      voice={"file_id": "v1", "file_unique_id": "v1",
                                             "duration": 2}))

    def message(self, text: str, user: int, username: str | None, *, chat: dict,
                **more: Any) -> dict[str, Any]:
        sender = {"id": user, "is_bot": False, "first_name": f"User{user}"}
        if username:
            sender["username"] = username
        with self.cond:
            number = self.message_ids.get(str(chat["id"]), 0) + 1
            self.message_ids[str(chat["id"])] = number
        message = {"message_id": number, "date": int(time.time()), "chat": chat,
                   "from": sender, **{k: v for k, v in more.items() if v is not None}}
        if text and "photo" not in more:
            message["text"] = text
            entities = [{"type": "mention", "offset": m.start(), "length": len(m.group())}
                        for m in re.finditer(r"@\w+", text)]
            if text.startswith("/"):
                entities.append({"type": "bot_command", "offset": 0,
                                 "length": len(text.split()[0])})
            if entities:
                message["entities"] = entities
        elif text:
            message["caption"] = text
        return message

    def throttle(self, method: str, seconds: int = 1) -> None:
        """The next call of ``method`` is answered 429 with ``retry_after`` ``seconds``."""
        self.throttled[method] = seconds

    def wait_sent(self, count: int, timeout: float = 20.0) -> list[dict[str, Any]]:
        """The messages sent, once there are at least ``count``."""
        end = time.monotonic() + timeout
        with self.cond:
            while len(self.sent) < count:
                left = end - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{len(self.sent)} messages sent, not {count}: "
                                         f"{self.sent}")
                self.cond.wait(left)
            return list(self.sent)

    def texts(self, chat: int | None = None) -> list[str]:
        return [m["text"] for m in self.sent if chat is None or m["chat_id"] == str(chat)]

    # --- serving -------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                prefix, path = f"/file/bot{api.token}/photos/", unquote(self.path)
                file_id = path[len(prefix):].removesuffix(".png")
                if path.startswith(prefix) and file_id in api.files:
                    self._reply(200, api.files[file_id], "image/png")
                else:
                    self._json(404, {"ok": False, "error_code": 404,
                                     "description": "Not Found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                match = re.fullmatch(r"/bot([^/]+)/(\w+)", self.path)
                if not match:
                    self._json(404, {"ok": False, "error_code": 404,
                                     "description": "Not Found"})
                    return
                token, method = match.groups()
                if token != api.token:
                    self._json(401, {"ok": False, "error_code": 401,
                                     "description": "Unauthorized"})
                    return
                params = _params(raw, self.headers.get("content-type", ""))
                status, body = api.answer(method, params)
                self._json(status, body)

            def _json(self, status: int, body: dict) -> None:
                self._reply(status, json.dumps(body).encode(), "application/json")

            def _reply(self, status: int, data: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler

    def answer(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.calls.append(method)
        self.times.append((method, time.monotonic()))
        if method in self.throttled:
            wait = self.throttled.pop(method)
            return 429, {"ok": False, "error_code": 429,
                         "description": f"Too Many Requests: retry after {wait}",
                         "parameters": {"retry_after": wait}}
        handler = getattr(self, f"_{method}", None)
        if handler is None:
            return 404, {"ok": False, "error_code": 404, "description": "Not Found"}
        try:
            return 200, {"ok": True, "result": handler(params)}
        except BadRequest as exc:
            return 400, {"ok": False, "error_code": 400, "description": f"Bad Request: {exc}"}

    def _getMe(self, params: dict) -> dict:
        return BOT

    def _getUpdates(self, params: dict) -> list[dict]:
        offset = int(params.get("offset") or 0)
        timeout = float(params.get("timeout") or 0)
        end = time.monotonic() + timeout
        with self.cond:
            self.polls += 1
            self.polling_now += 1
            self.most_polling = max(self.most_polling, self.polling_now)
            try:
                return self._updates_from(offset, end, params)
            finally:
                self.polling_now -= 1

    def _updates_from(self, offset: int, end: float, params: dict) -> list[dict]:
        """``getUpdates`` under the lock: confirm, then wait for something to return."""
        if offset:
            self.confirmed = max(self.confirmed, offset)
            self.updates = [u for u in self.updates if u["update_id"] >= offset]
        while True:
            found = [u for u in self.updates if u["update_id"] >= offset]
            left = end - time.monotonic()
            if found or left <= 0:
                limit = int(params.get("limit") or 100)
                return sorted(found, key=lambda u: u["update_id"])[:limit]
            self.cond.wait(min(left, 0.5))

    def _sendMessage(self, params: dict) -> dict:
        text = str(params.get("text") or "")
        self._check_text(text, params.get("parse_mode"))
        chat = str(params["chat_id"])
        with self.cond:
            number = self.message_ids.get(chat, 0) + 1
            self.message_ids[chat] = number
            sent = {"chat_id": chat, "text": text, "parse_mode": params.get("parse_mode"),
                    "message_id": number, "thread": params.get("message_thread_id")}
            self.sent.append(sent)
            self.cond.notify_all()
        return {"message_id": number, "date": int(time.time()), "text": text,
                "chat": {"id": int(chat), "type": "private"}, "from": BOT}

    def _editMessageText(self, params: dict) -> dict:
        text = str(params.get("text") or "")
        self._check_text(text, params.get("parse_mode"))
        chat, number = str(params["chat_id"]), int(params["message_id"])
        with self.cond:
            for sent in self.sent:
                if sent["chat_id"] == chat and sent["message_id"] == number:
                    if sent["text"] == text:
                        raise BadRequest("message is not modified")
                    sent["text"] = text
                    break
            else:
                raise BadRequest("message to edit not found")
            self.edits.append({"chat_id": chat, "message_id": number, "text": text})
            self.cond.notify_all()
        return {"message_id": number, "date": int(time.time()), "text": text,
                "chat": {"id": int(chat), "type": "private"}, "from": BOT}

    def _sendChatAction(self, params: dict) -> bool:
        with self.cond:
            self.actions.append({"chat_id": str(params["chat_id"]),
                                 "action": params.get("action")})
        return True

    def _setMyCommands(self, params: dict) -> bool:
        commands = params.get("commands")
        self.commands = json.loads(commands) if isinstance(commands, str) else commands
        return True

    def _getFile(self, params: dict) -> dict:
        file_id = str(params.get("file_id"))
        if file_id not in self.files:
            raise BadRequest("wrong file_id or the file is temporarily unavailable")
        return {"file_id": file_id, "file_unique_id": file_id,
                "file_size": len(self.files[file_id]), "file_path": f"photos/{file_id}.png"}

    @staticmethod
    def _check_text(text: str, parse_mode: Any) -> None:
        if not text.strip():
            raise BadRequest("message text is empty")
        if len(text) > 4096:
            raise BadRequest("message is too long")
        if parse_mode == "HTML" and (problem := html_problem(text)):
            raise BadRequest(f"can't parse entities: {problem}")


class BadRequest(Exception):
    pass


class Quiet(ThreadingHTTPServer):
    """A client that hangs up on a long poll (a poller stopping) is not an error."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


def _params(raw: bytes, kind: str) -> dict[str, Any]:
    """A request's parameters: a JSON body, or a form whose values may be JSON."""
    if not raw:
        return {}
    if "json" in kind:
        return json.loads(raw)
    if "multipart" in kind:
        raise AssertionError("the stand-in takes no uploads")
    found = {k: v[-1] for k, v in parse_qs(raw.decode(), keep_blank_values=True).items()}
    for key, value in found.items():
        if value[:1] in "[{":
            with contextlib.suppress(ValueError):
                found[key] = json.loads(value)
    return found
