"""Session lifecycle, the hooks the chat calls around a session: when it resets by itself
(``due_reset``), and what ends it (``end_session``: the memory flush, the session-memory file).

``reset_reason`` (pure) says whether the ``session.reset`` policy — ``daily`` at ``atHour``
local time (and after ``idleMinutes`` when that is given too), ``idle`` after
``idleMinutes``, or ``both`` — ends a session before the next message.
``save_session`` writes the ending session's last user/assistant messages to
``memory/YYYY-MM-DD-<slug>.md`` (slug from the model, ``HHMM`` when that fails or times out),
never overwriting a file, so the next session can find it with ``memory_search``.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from collections.abc import Generator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from clawd.config import Reset, SessionMemoryHook
from clawd.core import phrases
from clawd.core.cancel import CancelToken
from clawd.core.errors import ClawdError
from clawd.core.events import Event
from clawd.core.messages import (
    Message,
    ModelRequest,
    automated_turns,
    parse_iso,
    shown_time,
)
from clawd.core.templates import render
from clawd.loop.keeping import promote_facts
from clawd.providers.base import Provider, complete
from clawd.sessions.entry import SessionEntry
from clawd.workspace.files import MEMORY_DIR
from clawd.workspace.interface import WorkspaceFiles

if TYPE_CHECKING:
    from clawd.loop.session import Session

log = logging.getLogger(__name__)
SLUG_MAX = 30


def reset_reason(entry: SessionEntry, now: datetime, cfg: Reset) -> str | None:
    """Why the session must start afresh before this message (None: it continues)."""
    if cfg.mode == "off":
        return None
    last = parse_iso(entry.get("updatedAt")) or parse_iso(entry.get("createdAt"))
    if last is None:
        return None
    idle = cfg.idle_limit
    if idle is not None and now - last >= timedelta(minutes=idle):
        return f"idle for more than {idle} minute{'' if idle == 1 else 's'}"
    if cfg.mode in ("daily", "both"):
        boundary = now.replace(hour=cfg.at_hour, minute=0, second=0, microsecond=0)
        if now < boundary:
            boundary -= timedelta(days=1)
        if last < boundary:
            return f"daily reset at {cfg.at_hour:02d}:00"
    return None


def recent_messages(messages: list[Message], count: int) -> list[Message]:
    """The last ``count`` user/assistant messages that carry text."""
    chosen = [m for m in messages if m.role in ("user", "assistant") and m.text.strip()]
    return chosen[-count:]


# where words run together: "MOTDueOnJanuary2023" → MOT Due On January 2023
_JOINED = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[A-Za-z])(?=\d)"
                     r"|(?<=\d)(?=[A-Za-z])")


def _folded(text: str) -> str:
    """``text`` in ASCII, accents folded (Café → Cafe), so no word loses letters inside."""
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()


def sanitize_slug(text: str, *, cut: bool = False, said: str | None = None) -> str | None:
    """Lowercase, hyphenated, at most 30 characters, ending at a word boundary; None when
    nothing usable is left. ``cut``: the reply hit its token limit, so its last word may be
    a fragment and is dropped; a single word longer than 30 characters is not used. Words
    run together in camel case are parted; with ``said`` (the conversation), a number it
    never held is left out (a 1.5B model named a talk of "9 January" ``…january2023``)."""
    ascii_text = _folded(text)
    first = ascii_text.strip().splitlines()[0] if ascii_text.strip() else ""
    words = re.findall(r"[a-z0-9]+", _JOINED.sub(" ", first).lower())
    if cut:
        words = words[:-1]
    if said is not None:
        numbers = set(re.findall(r"\d+", said))
        words = [w for w in words if not w.isdigit() or w in numbers]
    slug = ""
    for word in words:
        candidate = f"{slug}-{word}" if slug else word
        if len(candidate) > SLUG_MAX:
            break
        slug = candidate
    return slug or None


def words_slug(messages: list[Message]) -> str | None:
    """A slug from the first user message's own words, when the model gives none (it failed,
    or took too long): ``my sister Ines lives in Porto`` → ``sister-ines-lives-porto``.
    None when it holds fewer than two words worth a name (``hi``): the time is used then."""
    first = next((m.text for m in messages if m.role == "user" and m.text.strip()), "")
    words = [w for w in re.findall(r"[a-z0-9]+", _folded(first).lower())
             if len(w) > 2 and w not in phrases.FUNCTION_WORDS]
    return sanitize_slug(" ".join(words)) if len(words) >= 2 else None


def model_slug(provider: Provider, messages: list[Message], timeout: float) -> str | None:
    """Ask the model for a slug, giving up after ``timeout`` seconds."""
    conversation = "\n".join(f"{m.role}: {m.text[:500]}" for m in messages[-8:])
    request = ModelRequest(system=["You name conversations."], tools=[], max_tokens=24,
                           messages=[Message.user(render("slug.md.j2",
                                                         conversation=conversation))])
    result: dict[str, str] = {}  # the reply's text, and "cut" when it hit max_tokens

    def ask() -> None:
        try:
            reply = complete(provider, request).message
            result["text"] = reply.text
            result["cut"] = "yes" if reply.stop_reason == "length" else ""
        except Exception as exc:  # noqa: BLE001 - any failure falls back to the words
            log.info("slug request failed: %s", exc)

    worker = threading.Thread(target=ask, daemon=True, name="clawd-slug")
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        log.info("slug request timed out after %ss", timeout)
        return None
    return sanitize_slug(result.get("text", ""), cut=bool(result.get("cut")), said=conversation)


def free_path(taken: list[str], folder: str, stem: str) -> str:
    """``<folder>/<stem>.md``, or ``<stem>-2.md`` etc. when one of ``taken`` has the name."""
    path, number = f"{folder}/{stem}.md", 2
    while path in taken:
        path = f"{folder}/{stem}-{number}.md"
        number += 1
    return path


def save_session(files: WorkspaceFiles, messages: list[Message], *, key: str,
                 session_id: str, reason: str, now: datetime, slug: str | None,
                 summary: str | None = None) -> str:
    """Write the session-memory file (the compaction summary of the earlier messages, when
    there is one, then the last messages); never overwrites an existing file. Returns its
    workspace-relative path."""
    slug = slug or now.strftime("%H%M")
    rows = [{"role": m.role, "text": m.text.strip(), "when": shown_time(m.timestamp)}
            for m in messages]
    text = render("session_memory.md.j2", date=now.date().isoformat(),
                  time=now.strftime("%H:%M"), slug=slug, key=key, session_id=session_id,
                  reason=reason, messages=rows, summary=(summary or "").strip()) + "\n"
    stem, taken = f"{now.date().isoformat()}-{slug}", files.listing(MEMORY_DIR)
    while True:
        path = free_path(taken, MEMORY_DIR, stem)
        try:
            files.create(path, text)  # never over a file: one made meanwhile takes the name
            return path
        except FileExistsError:
            taken.append(path)


def due_reset(session: Session) -> str | None:
    """Why ``session`` must start afresh before the next message (``session.reset``)."""
    rt = session.rt
    return reset_reason(session.entry, rt.clock(), rt.config.session.reset)


def end_session(old: Session, reason: str, token: CancelToken | None = None
                ) -> Generator[Event, None, str]:
    """What ends a session (``/new``, ``/reset``, an automatic reset): the once-per-cycle
    memory flush, the person's facts into MEMORY.md when the model may not curate it
    (``keeping.promote_facts``), then the session-memory file. Returns what the notice of
    the new session adds about the old one (where it was saved, or why not and where its
    transcript is)."""
    rt = old.rt
    yield from old.flush_before_end(token)
    # what scheduled jobs and the heartbeat said is never taken into memory (unless the job
    # says ``remember``): neither as the person's facts nor in the session-memory file
    automated = automated_turns(old.history.messages)
    said = [m for m in old.history.messages if m.id not in automated]
    if rt.writable() and old.access.private and not old.model.profile.consolidates:
        # a model that may not curate MEMORY.md: the person's facts go there in their words
        yield from promote_facts(said, old.access, rt)
    saved, unsaved = None, None
    if not rt.writable():
        unsaved = "the workspace is not writable"
    elif not old.access.may_save_session():
        unsaved = "memory/ is shareable and this is a group session"
    else:
        try:
            provider = old.provider
        except ClawdError:
            provider = None
        try:
            saved = end_session_memory(
                provider, rt.files, said, cfg=rt.config.hooks.session_memory,
                key=old.key, session_id=old.entry["sessionId"], reason=reason, now=rt.clock(),
                summary=old.history.summary)
        except OSError as exc:
            unsaved = f"cannot write to {MEMORY_DIR}/: {exc.strerror or exc}"
        if rt.config.hooks.consolidation.enabled:  # off by default: not loaded at start-up
            from clawd.loop.consolidate import after_session

            yield from after_session(rt, old.model, provider, private=old.access.private)
    if saved is not None:
        if rt.memory is not None:
            rt.memory.mark_dirty()
        return f"; the last one was saved to {saved}"
    if unsaved and any(m.role == "user" for m in said):
        return (f"; the last one was not saved to {MEMORY_DIR}/ ({unsaved}), its transcript "
                f"is kept: {old.transcript.location}")
    return ""


def end_session_memory(provider: Provider | None, files: WorkspaceFiles,
                       messages: list[Message], *, cfg: SessionMemoryHook, key: str,
                       session_id: str, reason: str, now: datetime,
                       summary: str | None = None) -> str | None:
    """The whole hook: pick messages, name them, write the file (None: nothing to save).
    The summary of what compaction took out of the history is saved with them: without
    it the file would keep only the session's end."""
    chosen = recent_messages(messages, cfg.messages)
    if not cfg.enabled or not chosen:
        return None
    slug = model_slug(provider, chosen, cfg.slug_timeout_seconds) if provider else None
    slug = slug or words_slug(chosen)
    return save_session(files, chosen, key=key, session_id=session_id, reason=reason,
                        now=now, slug=slug, summary=summary)
