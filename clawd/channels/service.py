"""The Telegram channel inside ``clawd serve`` (docs/channels.md).

``TelegramService.run`` becomes the bot's one poller (``ChannelState.try_poll``: an
advisory lock on PostgreSQL, so one worker of several polls and another takes over when it
stops; a lock file on the files) and long-polls ``getUpdates``. Each update is recorded as
taken (``first_time``) before anything is done with it, so an update Telegram delivers
again after a crash is never answered twice. Then, in arrival order: who may talk
(``access.verdict``: a stranger gets a pairing code, a refused sender is told once, a group
message that does not mention the bot, or whose sender the group's ``allowFrom`` does not
name, is ignored; a direct message from a person ``clawd users link`` linked to the
sender's id is let in and goes to that person's own agent, never the channel's), the bot
commands (``/new``, ``/compact``, ``/status`` run as the REPL's; ``/stop`` stops the
running turn), and a message is queued as a turn of its session (``keys.session_key``) in
the ``Hub`` — one writer per session, turns in the order queued, across workers — whose
events a ``Replier`` shows in the chat. A turn counts against the per-person quotas of
``gateway.quotas`` as the API's do (``hub.quotas.submit``; whose: ``access.counted_as``):
past them the sender is told once, in one line, when to try again, and nothing is queued.
An edit (``Inbound.edited``) is queued as a new message marked ``(edited)``
(``said.model_text``), unless it edits a command or a file. Voice messages and files are
answered "not supported yet"; a photo goes to the model with its caption. ``deliver`` is
what automation's outbox calls for a ``telegram:<chatId>`` target. Connection, last error
and messages in and out are recorded for ``clawd channels status``; the token never appears
in any of it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import Any

from clawd.channels import access, split
from clawd.channels.base import Inbound
from clawd.channels.keys import session_key
from clawd.channels.replies import Replier
from clawd.channels.said import is_command, model_text
from clawd.channels.telegram import TelegramApi, error_text
from clawd.config import Config
from clawd.core.messages import ImagePart
from clawd.frontends.hub import quotas
from clawd.frontends.hub.agents import UnknownAgent
from clawd.frontends.hub.hub import Hub
from clawd.frontends.hub.turns import QueueFull, Stopping

log = logging.getLogger(__name__)
CHANNEL = "telegram"
RETRY_SECONDS = 5.0  # after a failed poll or connection
HOLD_SECONDS = 60.0  # told once there is no room for a new session: silent this long
STANDBY_SECONDS = 5.0  # between tries to become the poller
COMMANDS = [("new", "start a new session"), ("compact", "summarise this session's history"),
            ("status", "model, context used, compactions"), ("stop", "stop the running turn")]
HELP = ("Talk to me here as anywhere. Commands: /new starts a new session, /compact "
        "summarises this one, /status shows it, /stop stops my reply.")
PAIRING = ("Hi! I don't know you yet. To talk to me, ask my operator to run:\n\n"
           "clawd pairing approve {code}\n\nThe code is valid for an hour.")
TOO_MANY = "Too many people are waiting to be let in right now; try again in an hour."
REFUSED = "Sorry, I'm not taking messages from you here."
UNREACHABLE = "I can't reach your own assistant right now; please try again in a minute."
SLOW_DOWN = "You're sending messages faster than I can take them; try again in {seconds} s."
NO_ROOM = "I can't start a new conversation here right now: there are too many already."
NOT_YET = ("Voice messages and files are not supported yet; please send text or a photo "
           "instead.")


class TelegramService:
    """One bot, polled and answered (see the module docstring)."""

    def __init__(self, config: Config, hub: Hub, *, state: Any = None,
                 poll_seconds: float = 30.0):
        from clawd.storage import open_channels

        self.rules = config.channels.telegram
        self.quotas = config.gateway.quotas
        self.dm_scope = config.session.dm_scope
        self.hub = hub
        self.state = state if state is not None else open_channels(config)
        self.token = self.rules.token() or ""
        self.bot = self.token.partition(":")[0] or "bot"
        self.api = TelegramApi(self.token, self.rules.api_root, poll_seconds=poll_seconds)
        self.task: asyncio.Task[None] | None = None
        self.answering: set[asyncio.Task[None]] = set()
        self.last: dict[str, asyncio.Task[None]] = {}  # session key: its latest answer
        self.polling = asyncio.Event()  # set while this process is the poller
        self.held: dict[tuple[str, str], float] = {}  # (chat, sender): told to wait till

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.run())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        if self.answering:
            await asyncio.wait(self.answering, timeout=5)
        if self.polling.is_set():
            await self._note(connected=False)
        await asyncio.to_thread(self.state.stop_polling, self.bot)
        await self.api.close()

    # --- polling --------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            try:
                if not await asyncio.to_thread(self.state.try_poll, self.bot):
                    await asyncio.sleep(STANDBY_SECONDS)  # another worker polls
                    continue
                self.polling.set()
                self._agent()  # an unknown channels.telegram.agent is the last error
                await self.api.start()
                await self.api.set_commands(COMMANDS)
                await self._note(connected=True, error="")
                log.info("telegram: polling as @%s", self.api.username)
                await self._poll()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - said, recorded, tried again
                said = error_text(exc, self.token)
                log.warning("telegram: %s; trying again in %.0f s", said, RETRY_SECONDS)
                await self._note(connected=False, error=said)
                await asyncio.sleep(RETRY_SECONDS)

    async def _poll(self) -> None:
        offset: int | None = None
        checked = time.monotonic()
        while not self.hub.stopping:
            for update_id, message in await self.api.updates(offset):
                offset = update_id + 1
                if self.hub.stopping:
                    return  # left for the next process: not taken
                # taken per bot: another bot's update ids start elsewhere
                if not await asyncio.to_thread(self.state.first_time,
                                               f"{CHANNEL}:{self.bot}", update_id):
                    continue  # delivered again: answered already
                if message is None:
                    continue
                await self._note(inbound=1)
                try:
                    await self.take(message)
                except Exception as exc:  # noqa: BLE001 - one message; the poller goes on
                    said = error_text(exc, self.token)
                    log.warning("telegram: a message from chat %s failed: %s",
                                message.chat_id, said)
                    await self._note(error=said)
            if time.monotonic() - checked > 60:  # still the poller (its lock held)?
                checked = time.monotonic()
                if not await asyncio.to_thread(self.state.try_poll, self.bot):
                    raise RuntimeError("lost the poller's lock")

    # --- one message ----------------------------------------------------------------------

    async def take(self, message: Inbound) -> None:
        """Answer ``message`` as its sender is allowed (see the module docstring)."""
        approved = await asyncio.to_thread(self.state.approved, CHANNEL)
        linked = await self._linked(message)
        person = linked if message.chat_type == "dm" else None
        verdict = access.verdict(self.rules, message, approved, linked=linked is not None)
        if verdict == "ignore":
            return
        if verdict == "refuse":
            if await asyncio.to_thread(self.state.told, CHANNEL, message.sender_id):
                await self.say(message, REFUSED)
            return
        if verdict == "pair":
            await self._pair(message)
            return
        text = message.text.strip()
        if message.edited and (is_command(text) or message.kind not in ("text", "image")):
            return  # a command ran on the first version; a file's caption changes nothing
        if message.kind in ("voice", "file", "other"):
            await self.say(message, NOT_YET)
            return
        agent_id = self._agent() if person is None else self._theirs(person)
        if agent_id is None:
            await self.say(message, UNREACHABLE)
            return
        owner = person is None and access.is_listed(message.sender_id, message.sender_name,
                                                    self.rules.allow_from)
        key = session_key(agent_id, message, dm_scope=self.dm_scope, owner=owner)
        if is_command(text):
            text = await self._command(message, agent_id, key, text)
            if not text:
                return
        else:
            text = model_text(message, text)
        images: tuple[ImagePart, ...] = ()
        if message.kind == "image" and message.file_id:
            images = (await self.api.image(message.file_id),)
        counted = access.counted_as(message, linked and linked.name, self.rules.allow_from,
                                    operator=self.quotas.operator)
        try:
            turn, _ = await quotas.submit(self.hub, self.quotas, counted, agent_id, key,
                                          text, images=images)
        except quotas.OverQuota as exc:
            await self._hold(message, SLOW_DOWN.format(seconds=exc.retry_after),
                             exc.retry_after)
            return
        except quotas.TooManySessions:
            await self._hold(message, NO_ROOM, HOLD_SECONDS)
            return
        except QueueFull as exc:
            await self.say(message, f"I'm still busy with your earlier messages; try again in "
                                    f"{exc.retry_after} s.")
            return
        except Stopping:
            return
        # a session's turns run in order; their answers are shown in that order too: the
        # next follows its turn (whose lines wait in its feed) once the one before is shown
        before = self.last.get(key)
        task = asyncio.get_running_loop().create_task(self._answer(turn, message, before))
        self.answering.add(task)
        self.last[key] = task
        task.add_done_callback(functools.partial(self._answered, key))

    def _answered(self, key: str, task: asyncio.Task[None]) -> None:
        self.answering.discard(task)
        if self.last.get(key) is task:
            del self.last[key]

    async def _hold(self, message: Inbound, text: str, seconds: float) -> None:
        """Tell the sender ``text`` once while they are held back for ``seconds``: the
        messages they send meanwhile are refused silently."""
        now = time.monotonic()
        self.held = {k: t for k, t in self.held.items() if t > now}
        where = (message.chat_id, message.sender_id)
        if where not in self.held:
            self.held[where] = now + seconds
            await self.say(message, text)

    async def _pair(self, message: Inbound) -> None:
        if await asyncio.to_thread(self.state.was_denied, CHANNEL, message.sender_id):
            return
        request, made = await asyncio.to_thread(
            self.state.request, CHANNEL, message.sender_id, message.sender_name,
            message.chat_id, time.time())
        if request is None:
            if await asyncio.to_thread(self.state.told, CHANNEL, message.sender_id):
                await self.say(message, TOO_MANY)
        elif made:
            log.warning("telegram: %s asks to talk; clawd pairing approve %s",
                        message.sender_name or message.sender_id, request.code)
            await self.say(message, PAIRING.format(code=request.code))

    async def _command(self, message: Inbound, agent_id: str, key: str, text: str) -> str:
        """A bot command: what to queue as the turn ("" when answered here)."""
        name, _, rest = text[1:].partition(" ")
        name = name.lower()
        if name in ("new", "compact", "status"):
            return f"/{name} {rest}".strip()
        if name == "stop":
            stopped = await self.hub.abort(agent_id, key)
            await self.say(message, "Stopped." if stopped else "Nothing is running.")
        elif name in ("start", "help"):
            await self.say(message, HELP)
        else:
            await self.say(message, "Commands here: /new, /compact, /status, /stop.")
        return ""

    async def _answer(self, turn: Any, message: Inbound,
                      before: asyncio.Task[None] | None = None) -> None:
        if before is not None:
            await asyncio.wait([before])
        replier = Replier(self.api, message)
        try:
            await replier.follow(turn.feed.lines_of(-1))
        except Exception as exc:  # noqa: BLE001 - one chat's failure is recorded
            said = error_text(exc, self.token)
            log.warning("telegram: a reply to chat %s failed: %s", message.chat_id, said)
            await self._note(error=said)
        finally:
            if replier.sent:
                await self._note(outbound=replier.sent)

    async def say(self, message: Inbound, text: str) -> None:
        """A short plain-text answer of clawd's own (never the model's)."""
        try:
            await self.api.send(message.chat_id, text, thread=message.thread, html=False)
            await self._note(outbound=1)
        except Exception as exc:  # noqa: BLE001 - recorded; the poller goes on
            await self._note(error=error_text(exc, self.token))

    async def deliver(self, target: str, text: str) -> int:
        """Automation's outbox: ``text`` (Markdown) to ``telegram:<chatId>``; the message
        id Telegram gave the last part. Raises when a part could not be sent (retry)."""
        from clawd.channels.delivery import parse_target

        _, chat = parse_target(target)
        number = 0
        for part in split.parts(text):
            number = await self.api.send(chat, part)
            await self._note(outbound=1)
        return number

    def _agent(self) -> str:
        return self.hub.agents.find(self.rules.agent)

    async def _linked(self, message: Inbound) -> Any:
        """The person linked to the sender (``clawd users link``), or None (no people,
        nobody linked). Their direct messages go to their own agent; in a group they are
        the group's like anyone, but their turns count against their own quota."""
        people = getattr(self.hub.agents, "people", None)
        if people is None:
            return None
        return await asyncio.to_thread(people.linked, f"{CHANNEL}:{message.sender_id}")

    def _theirs(self, person: Any) -> str | None:
        """The served agent of a linked person (their first), or None: not served here."""
        for agent in person.agents:
            try:
                return self.hub.agents.find(agent)
            except UnknownAgent:
                continue
        return None

    async def _note(self, **change: Any) -> None:
        try:
            await asyncio.to_thread(functools.partial(self.state.note, CHANNEL, **change))
        except Exception as exc:  # noqa: BLE001 - the status is a report, not the work
            log.warning("telegram: status not recorded: %s", type(exc).__name__)


def start_channels(config: Config, hub: Hub) -> TelegramService | None:
    """The Telegram channel, started, when ``channels.telegram.enabled`` (None: not)."""
    rules = config.channels.telegram
    if not rules.enabled:
        return None
    if not rules.token():
        log.warning("channels.telegram is enabled but has no bot token: set "
                    "channels.telegram.botToken or TELEGRAM_BOT_TOKEN")
        return None
    service = TelegramService(config, hub)
    service.start()
    return service
