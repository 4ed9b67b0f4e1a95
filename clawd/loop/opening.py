"""Opening a session: its entry in ``sessions.json``, its transcript and its history.

``open_entry`` checks that the model's window can hold the fixed layers, creates the entry
(and its transcript) for a new session or re-pins an existing one, loads the history, records
the session key in a transcript whose header predates it, keeps ``contextTokens`` (OpenClaw's
meaning: the window) current, and warns once about each unreadable transcript line.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from clawd.context.access import Access
from clawd.core.messages import new_id
from clawd.loop.runtime import Runtime, session_model
from clawd.sessions.entry import SessionEntry, new_entry
from clawd.sessions.files import KEY_ENTRY, session_key_of
from clawd.sessions.interface import TranscriptLog
from clawd.sessions.transcript import History, begin, build_history

log = logging.getLogger(__name__)


@dataclass
class Opened:
    entry: SessionEntry
    transcript: TranscriptLog
    history: History
    warnings: list[str]  # unreadable transcript lines not reported before


def open_entry(rt: Runtime, key: str, access: Access, pinned: str | None, *,
               run_model: str | None = None, fresh: bool = False) -> Opened:
    """Open session ``key``: a new one when ``fresh`` or none exists. ``pinned`` is pinned
    to it (``modelOverride``); ``run_model`` is used by this process only."""
    store = rt.store
    stored = store.get(key)
    # the session's model from here on (a pin below names the same one)
    model = rt.models(run_model or pinned or session_model(stored, rt.settings))
    rt.check_window(access, model)
    if fresh or stored is None or not stored.get("sessionId"):
        entry = _start(rt, key, pinned)
    elif pinned and pinned != stored.get("modelOverride"):
        entry = store.patch(key, base=stored, model=pinned, modelOverride=pinned) or stored
    else:
        entry = stored
    transcript = rt.storage.transcript(entry["sessionId"], key)
    loaded = begin(transcript, rt.agent_id, key=key, model=entry.get("model"),
                   modelOverride=entry.get("modelOverride"), timestamp=entry.get("createdAt"))
    if loaded.header is not None and session_key_of(loaded) is None:
        # written before headers named the key: recorded once, so a rebuilt store finds it
        transcript.append({"type": KEY_ENTRY, "key": key})
    housekeeping: dict[str, Any] = {}
    known = set(entry.get("invalidLines") or [])
    warnings = [w for n, w in zip(loaded.invalid_lines, loaded.warnings) if n not in known]
    for warning in warnings:  # each unreadable line is warned about once, not on every run
        log.warning(warning)
    if warnings:
        housekeeping["invalidLines"] = sorted(known | set(loaded.invalid_lines))
    if entry.get("contextTokens") != model.context_window:  # OpenClaw's meaning: the window
        housekeeping["contextTokens"] = model.context_window
    if housekeeping:  # not activity: updatedAt (read by idle resets) is left alone
        entry = store.patch(key, base=entry, touch=False, **housekeeping) or entry
    return Opened(entry, transcript, build_history(loaded.entries), warnings)


def _start(rt: Runtime, key: str, model: str | None) -> SessionEntry:
    session_id = new_id() + new_id()[:4]
    ref = model or session_model(None, rt.settings)
    entry = new_entry(session_id, rt.storage.session_file(session_id), ref, rt.now_iso(),
                      context_window=rt.models(ref).context_window)
    if model:
        entry["modelOverride"] = model
    return rt.store.update(key, lambda old: entry) or entry
