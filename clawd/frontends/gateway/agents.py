"""The agents a gateway serves, each with its one ``Runtime`` (built when first used).

``clawd serve`` serves every agent of the config, or only ``--agent``. A runtime is built by
the composition root as ``clawd chat -m`` builds it (``exec`` only when
``tools.exec.allowInScripts``: nobody is at a terminal to approve a command); tests hand in
runtimes of their own. ``close`` closes each agent's memory index. Nothing here reads the
database on the event loop: the people's agents are read again on a thread of their own.
Each runtime's MCP tools that ask first ask the page that sent the turn (``approvals``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from clawd.config import Config
from clawd.frontends.gateway.approvals import PageApprovals
from clawd.frontends.hub.agents import UnknownAgent
from clawd.loop.runtime import Runtime

log = logging.getLogger(__name__)
PEOPLE_SECONDS = 2.0  # the people's agents are read again after this long, off the loop


class ServedAgents:
    """The served agents: ids, and a runtime per id made on first use."""

    def __init__(self, config: Config, ids: list[str],
                 build: Callable[[str], Runtime] | None = None, people: Any = None):
        self.config = config
        self._ids = ids
        self.people = people  # ``storage.people.People``: their agents are served too
        self._theirs: tuple[float, list[str]] = (0.0, [])
        self._build = build or (lambda agent: _build_runtime(config, agent))
        self._runtimes: dict[str, Runtime] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()  # set by close: the people are read no more
        self.approvals = PageApprovals()

    @classmethod
    def of_config(cls, config: Config, only: str | None = None) -> ServedAgents:
        """Every agent of the config and of its people (``clawd users``), or only ``only``
        (an unknown id fails in one line)."""
        from clawd.config import resolve_agent
        from clawd.frontends.compose import config_for_agent
        from clawd.storage import open_people

        if only is not None:
            agent_id, _ = resolve_agent(config_for_agent(config, only), only)
            return cls(config, [agent_id])
        return cls(config, config.agent_ids(), people=open_people(config))

    @property
    def ids(self) -> list[str]:
        """The served agents: the config's, then those of people added since (looked up
        again after ``PEOPLE_SECONDS``, so ``clawd users add`` needs no restart)."""
        if self.people is None:
            return self._ids
        if not self._theirs[0]:
            with self._lock:  # the first time (the gateway starting): looked up now, then
                # again on a thread of its own every PEOPLE_SECONDS: no request waits for it
                if not self._theirs[0]:
                    self._look_up()
                    threading.Thread(target=self._keep_up, daemon=True,
                                     name="clawd-people").start()
        return self._ids + self._theirs[1]

    def _look_up(self) -> list[str]:
        """The people's agents, read again (the last list stays when that fails)."""
        try:
            known = {a.lower() for a in self._ids}
            theirs = list(dict.fromkeys(a for p in self.people.all() for a in p.agents
                                        if a.lower() not in known))
        except Exception as exc:  # noqa: BLE001 - the last list serves until the next try
            log.warning("could not read the people: %s", exc)
            theirs = self._theirs[1]
        self._theirs = (time.monotonic(), theirs)
        return theirs

    def _keep_up(self) -> None:
        while not self._closed.wait(PEOPLE_SECONDS):
            self._look_up()

    def reaches(self, allowed: frozenset[str] | None) -> list[str]:
        """The served agents a token reaching ``allowed`` (None: all) may use."""
        return [a for a in self.ids if allowed is None or a.lower() in allowed]

    @classmethod
    def of_runtimes(cls, runtimes: list[Runtime], config: Config | None = None,
                    people: Any = None) -> ServedAgents:
        """The served agents over runtimes built elsewhere (tests, benchmarks)."""
        agents = cls(config or runtimes[0].config, [rt.agent_id for rt in runtimes],
                     people=people)
        agents._runtimes = {rt.agent_id: rt for rt in runtimes}
        return agents

    @property
    def default(self) -> str:
        configured = self.config.default_agent_id()
        return configured if configured in self._ids else self.ids[0]

    def find(self, name: str | None) -> str:
        """The id of the agent ``name`` (any case; None: the default one)."""
        if name is None:
            return self.default
        for agent_id in self.ids:
            if agent_id.lower() == name.strip().lower():
                return agent_id
        raise UnknownAgent(f"unknown agent {name!r}; this gateway serves "
                           f"{', '.join(self.ids)}")

    def runtime(self, agent_id: str) -> Runtime:
        with self._lock:
            found = self._runtimes.get(agent_id)
            if found is None:
                found = self._runtimes[agent_id] = self._build(agent_id)
            found.confirm = self.approvals
            if found.mcp is not None:  # a server's question goes to the page too
                found.mcp.elicit = self.approvals.ask
                found.mcp.elicit_url = self.approvals.link
            return found

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            for runtime in self._runtimes.values():
                if runtime.memory is not None:
                    runtime.memory.close()


def _build_runtime(config: Config, agent_id: str) -> Runtime:
    """The agent's runtime, its memory files watched (``sync.watch``): a note written while
    the gateway runs is found by its chats and by ``/mcp``."""
    from clawd.frontends.compose import build_runtime

    runtime = build_runtime(config, agent_id, deliver="web")
    if runtime.memory is not None:
        runtime.memory.start_watcher()
    return runtime
