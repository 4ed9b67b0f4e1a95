"""``clawd users add | list | remove | purge | rotate | link | unlink``: the people of a
clawd (docs/hosting.md, "People").

``add NAME`` makes a token (printed once; only its digest is kept) and, unless ``--agent
ID`` names an agent they are to share, an agent of the person's own called ``NAME``: its
workspace gets the template's files (SOUL.md, MEMORY.md …) and it has sessions and daily
logs of its own. The person's token reaches their agents only, over the gateway and the web
page; the operator's token (``gateway.auth.token``) reaches every agent. ``remove`` takes
the person's access away (their agent's files stay; with ``--purge`` they go too, as with
``purge``: ``cli.purge``); ``rotate`` replaces the token. ``link NAME telegram:<userId>``
links the person to their Telegram account, so what they write to the bot goes to their own
agent (no pairing); ``unlink`` undoes it.
``lockouts`` lists the addresses locked out after too many wrong tokens
(``gateway.auth.rateLimit``) and ``unlock ADDRESS`` lets one sign in again at once: an
address, or an IPv6 address's /64 (which is what is counted); a running ``clawd serve`` sees
it within a second.
"""

from __future__ import annotations

import argparse
from typing import Any

from clawd.core.errors import ClawdError


def cmd_users(args: argparse.Namespace) -> int:
    from clawd.config import load_config
    from clawd.storage import open_people

    config = load_config()
    people = open_people(config)
    action = args.users_command
    if action in ("lockouts", "unlock"):
        return _lockouts(config, getattr(args, "address", None))
    if action == "add":
        return _add(config, people, args.name, args.agent)
    if action == "purge" or (action == "remove" and args.purge):
        from clawd.frontends.cli.purge import purge

        return purge(config, people, args.name, yes=args.yes, ask=input)
    if action == "remove":
        person = people.remove(args.name)
        print(f"removed {person.name}: their token no longer works; the files of "
              f"{', '.join(person.agents)} are kept")
        return 0
    if action in ("link", "unlink"):
        person = (people.link if action == "link" else people.unlink)(args.name, args.account)
        if action == "link":
            print(f"linked {person.name} to {args.account.strip().lower()}: their messages "
                  f"there go to their agent {person.agents[0]}")
        else:
            print(f"unlinked {person.name} from {args.account.strip().lower()}")
        return 0
    if action == "rotate":
        person, token = people.rotate(args.name)
        print(f"a new token for {person.name} (the old one no longer works; shown once):")
        print(token)
        return 0
    found = people.all()
    if not found:
        print(f"no people yet ({people.location}); add one with clawd users add NAME")
    for person in found:
        linked = f"  linked {', '.join(person.links)}" if person.links else ""
        print(f"{person.name:<20} agents {', '.join(person.agents):<24} since "
              f"{person.created[:10]}{linked}")
    return 0


def _add(config: Any, people: Any, name: str, agent: str | None) -> int:
    from clawd.frontends.compose import agent_storage, with_people
    from clawd.storage.people import checked_name

    name = checked_name(name)
    known = {a.lower(): a for a in with_people(config).agent_ids()}
    if agent is not None:
        if agent.lower() not in known:
            raise ClawdError(f"unknown agent {agent!r} (there are: {', '.join(known.values())})")
        agents = (known[agent.lower()],)
    elif name in known:
        raise ClawdError(f"there is an agent {name} already; give {name} that agent with "
                         f"--agent {name}, or choose another name")
    else:
        agents = (name,)
    person, token = people.add(name, agents)
    if agent is None:
        storage = agent_storage(config, name)
        made = _seed(storage.files)
        print(f"added {name} with an agent of their own, {name} ({storage.files.location}; "
              f"{made} files from the template)")
    else:
        print(f"added {name}, reaching agent {agents[0]}")
    print("their token (shown once; clawd keeps only its digest):")
    print(token)
    return 0


def _lockouts(config: Any, address: str | None) -> int:
    """List the lockouts, or lift ``address``'s."""
    from clawd.frontends.hub.sign_ins import rate_key

    kept = _kept(config)
    if address is None:
        found = kept.lockouts()
        if not found:
            print(f"no address is locked out ({kept.location})")
        for client, until in found.items():
            print(f"{client:<40} locked out until {_when(until)}")
        return 0
    client = rate_key(address.strip())
    until = kept.unlock(client)
    if until is None:
        raise ClawdError(f"{client} is not locked out (clawd users lockouts lists those that "
                         f"are)")
    shown = client if client == address.strip() else f"{client} (for {address.strip()})"
    print(f"{shown} may sign in again (it was locked out until "
          f"{_when(until)}); its wrong tokens are forgotten")
    return 0


def _kept(config: Any) -> Any:
    """Where the lockouts are: the database's ``auth_failures``, or ``lockouts.json``."""
    from clawd.storage import open_lockouts

    return open_lockouts(config)


def _when(until: float) -> str:
    from datetime import datetime

    return datetime.fromtimestamp(until).astimezone().isoformat(timespec="seconds")


def _seed(files: Any) -> int:
    """Lay the workspace template down in ``files`` (what exists is kept)."""
    from clawd.workspace.template import template_files

    made = 0
    for rel, resource in template_files():
        if files.stat(rel) is None:
            files.create(rel, resource.read_text(encoding="utf-8"))
            made += 1
    return made


def add_parsers(command: Any, sub: Any) -> None:
    add = command(sub, "add", "add a person: a token (shown once) and, unless --agent names "
                  "one, an agent of their own")
    add.add_argument("name", metavar="NAME")
    command(sub, "list", "the people, their agents")
    remove = command(sub, "remove", "take a person's access away (their files stay, unless "
                     "--purge)")
    remove.add_argument("name", metavar="NAME")
    remove.add_argument("--purge", action="store_true",
                        help="delete their own agent's sessions, notes and files too")
    remove.add_argument("--yes", action="store_true", help="do not ask before purging")
    purge = command(sub, "purge", "delete the data of a person (removed or not): their own "
                    "agent's sessions, notes and files")
    purge.add_argument("name", metavar="NAME")
    purge.add_argument("--yes", action="store_true", help="do not ask first")
    command(sub, "rotate", "a new token for a person (the old one stops working)"
            ).add_argument("name", metavar="NAME")
    for verb, about in (("link", "link a person to their account on a channel: what they "
                                 "write there goes to their own agent"),
                        ("unlink", "undo a link")):
        linking = command(sub, verb, about)
        linking.add_argument("name", metavar="NAME")
        linking.add_argument("account", metavar="telegram:USERID",
                             help="the person's Telegram user id (a number; clawd pairing "
                                  "list shows it)")
    command(sub, "lockouts", "the addresses locked out after too many wrong tokens")
    command(sub, "unlock", "let an address locked out after too many wrong tokens sign in "
            "again now").add_argument("address", metavar="ADDRESS",
                                      help="an IP address (an IPv6 one: its /64 is unlocked)")
