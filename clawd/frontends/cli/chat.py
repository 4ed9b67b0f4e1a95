"""The one wiring of a chat, for ``clawd chat -m``/``--script`` and the REPL alike.

``open_chat`` builds the agent's runtime, picks the session key (``--session``, or the key
``--resume ID`` points at that session), checks the model before anything is touched (a
missing key is one line, and no session changes), and yields a ``Chat``; when the chat ends,
the memory index is closed (an unfinished sync resumes next time).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from clawd.config import Config
from clawd.core.errors import ClawdError
from clawd.frontends.cli.mcp import told_of
from clawd.frontends.commands import Chat
from clawd.frontends.compose import build_runtime, chat_agent, check_provider, session_key
from clawd.loop.runtime import Runtime
from clawd.sessions.entry import SessionEntry
from clawd.sessions.files import entry_from
from clawd.sessions.store import main_key
from clawd.storage.session_admin import resolve_by_id


@contextmanager
def open_chat(config: Config, args: argparse.Namespace, *,
              approve: Callable[[str], bool] | None = None,
              background: bool = False) -> Iterator[Chat]:
    """The chat ``args`` ask for (``--agent``, ``--session``, ``--resume``, ``--model``,
    ``--allow-exec``); ``approve`` asks before shell commands (the REPL); ``background``:
    the index syncs in the background (the REPL), not before the first search."""
    runtime = build_runtime(config, chat_agent(config, args.agent, args.session),
                            allow_exec=args.allow_exec, approve=approve)
    for problem in runtime.mcp.problems() if runtime.mcp else []:
        print(f"· {problem}", file=sys.stderr)
    if runtime.mcp is not None and (note := told_of(config, runtime.tools, runtime.agent_id,
                                                     args.model)):
        print(f"· {note}", file=sys.stderr)
    try:
        key = chat_key(runtime, args)
        # A missing key or unknown model is one line before any prompt (and before the
        # session is touched); the SDK itself is imported later, when first needed.
        check_provider(runtime, key, args.model)
        with Chat.open(runtime, key, args.model, background=background) as chat:
            yield chat
    finally:
        if runtime.memory is not None:
            runtime.memory.close()


def chat_key(runtime: Runtime, args: argparse.Namespace) -> str:
    """The session key ``chat`` uses: ``--session``, or the key ``--resume ID`` points at
    that session."""
    if getattr(args, "resume", None):
        return resume_key(runtime, args.resume, args.session)
    return session_key(runtime.agent_id, args.session)


def resume_key(runtime: Runtime, wanted: str, session: str | None) -> str:
    """Point the session's key at the session ``wanted`` (``chat --resume``); return the key.

    The key is the one the transcript's header names; the session the key pointed at
    before stays on disk (``sessions list --all``)."""
    store = runtime.store
    row = resolve_by_id(runtime.storage, wanted)
    s = row.summary
    key = main_key(runtime.agent_id, row.key or s.key or f"session-{s.session_id}")
    if session and main_key(runtime.agent_id, session) != key:
        raise ClawdError(f"session {s.session_id} belongs to {key}; leave out --session "
                         f"(or use --session {key})")
    held = runtime.storage.hold(key)  # no one is using the key meanwhile
    try:
        def point(old: SessionEntry | None) -> SessionEntry:
            if old is not None and old.get("sessionId") == s.session_id:
                return old
            return entry_from(s, runtime.settings.model,
                              runtime.storage.session_file(s.session_id))
        store.update(key, point)
    finally:
        held.release()
    return key
