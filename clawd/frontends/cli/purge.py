"""``clawd users remove NAME --purge`` and ``clawd users purge NAME``: a person's access taken
away and their agent's data deleted for good, after a confirmation (``--yes`` skips it).

What goes is everything of the person's own agent (by default the agent called ``NAME``):
with ``storage.url`` its rows (``storage.postgres.purge``: sessions, transcripts, workspace
files and versions, records, memory index, turn records) and the person's turn tickets;
on files its workspace folder, its folder under ``<state>/agents/`` and its memory index
file. An agent that is not theirs alone is kept, and said so: one the config lists (the
operator's), or one another person reaches too. ``purge NAME`` is for a person removed
earlier: their agent ``NAME`` is purged if nobody reaches it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clawd.core.errors import ClawdError

Ask = Callable[[str], str]
NOTHING = "nothing held"


def purge(config: Any, people: Any, name: str, *, yes: bool, ask: Ask) -> int:
    """Remove ``name`` (if still a person) and delete their own agents' data; the exit code."""
    from clawd.storage.people import checked_name

    name = checked_name(name)
    person = next((p for p in people.all() if p.name == name), None)
    agents = person.agents if person is not None else (name,)
    own = {a.lower() for a in config.agent_ids()}
    others = {a.lower() for p in people.all() if p.name != name for a in p.agents}
    theirs = [a for a in agents if a.lower() not in own and a.lower() not in others]
    kept = [a for a in agents if a not in theirs]
    if person is None and not theirs:
        raise ClawdError(f"no person {name}, and no agent {name} of a removed person to purge "
                         f"(clawd users list)")
    what = ", ".join(theirs) or "no agent of their own"
    if not yes:
        print(f"This deletes {name}'s access and every session, transcript, note and file "
              f"of {what}, for good.")
        if ask(f"Type {name} to go on: ").strip() != name:
            print("nothing was deleted")
            return 1
    if person is not None:
        people.remove(name)
        print(f"removed {name}: their token no longer works")
    for agent in theirs:
        said = _purge_agent(config, agent, name)
        if person is None and said == NOTHING:
            raise ClawdError(f"no person {name}, and nothing of an agent {agent} to purge "
                             f"(clawd users list)")
        print(f"purged {agent}: {said}")
    for agent in kept:
        print(f"kept {agent}: it is the operator's or another person's too")
    return 0


def _purge_agent(config: Any, agent_id: str, person: str) -> str:
    """Delete one agent's data; what went, in a few words."""
    url = config.storage.effective_url()
    if url:
        from clawd.storage import open_database
        from clawd.storage.postgres.purge import purge_agent

        done = purge_agent(open_database(url), agent_id, person)
        return ", ".join(f"{n} {table}" for table, n in done.items() if n) or NOTHING
    return _purge_files(config, agent_id)


def _purge_files(config: Any, agent_id: str) -> str:
    """On files: the agent's workspace folder, state folder and index file, each only when
    it is its own (no other agent's workspace or the state folder within or around it)."""
    from clawd.config import resolve_agent
    from clawd.core.paths import state_dir
    from clawd.memory.index import store_path

    settings = resolve_agent(_as_persons(config, agent_id), agent_id)[1]
    state = state_dir().resolve()
    others = [Path(resolve_agent(config, a)[1].workspace).expanduser().resolve()
              for a in config.agent_ids()]
    workspace = Path(settings.workspace).expanduser().resolve()
    found: list[Path] = [state / "agents" / agent_id]
    if not any(_overlap(workspace, other) for other in [*others, state]):
        found.append(workspace)
    if not settings.memory_search.store.path or "{agentId}" in settings.memory_search.store.path:
        index = store_path(agent_id, settings.memory_search, state)
        found += [index, index.with_name(index.name + "-wal"), index.with_name(index.name + "-shm")]
    gone = []
    for path in found:
        if path.is_dir():
            shutil.rmtree(path)
            gone.append(str(path))
        elif path.exists():
            path.unlink()
            gone.append(str(path))
    return ", ".join(gone) or NOTHING


def _overlap(one: Path, other: Path) -> bool:
    return one == other or one in other.parents or other in one.parents


def _as_persons(config: Any, agent_id: str) -> Any:
    """``config`` knowing ``agent_id`` as a person's agent (it may be no person's any more)."""
    from clawd.config import DEFAULT_AGENT_ID, AgentEntry

    grown = config.model_copy(deep=True)
    entries = list(config.agents.entries) or [AgentEntry(id=DEFAULT_AGENT_ID, default=True)]
    grown.agents.entries = entries + [AgentEntry(id=agent_id)]
    grown.source = config.source
    grown.people_agents = frozenset({agent_id})
    return grown
