"""``clawd history list | show | restore``: earlier versions of the bootstrap files and
MEMORY.md that clawd kept before a tool changed them, and of the notes ``clawd memory
forget`` changed (see ``clawd.workspace.backups``)."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime


def cmd_history(args: argparse.Namespace) -> int:
    from clawd.config import load_config, resolve_agent
    from clawd.core.errors import ClawdError
    from clawd.frontends.compose import agent_storage

    config = load_config()
    agent_id, _ = resolve_agent(config, args.agent)
    backups = agent_storage(config, agent_id).backups
    action = args.history_command
    if action == "list":
        kept = backups.versions(args.file)
        if not kept:
            print(f"no earlier versions kept in {backups.location}")
        for version in reversed(kept):  # newest first
            print(f"{version.ref:<34} {version.when}  {version.size:>8,} bytes")
        return 0
    version = backups.find(args.version)
    if action == "show":
        sys.stdout.write(backups.text(version))
        return 0
    try:
        saved = backups.restore(version, datetime.now())
    except OSError as exc:
        raise ClawdError(f"cannot restore {version.name}: {exc.strerror or exc}; it is "
                         f"unchanged") from None
    print(f"restored {version.name} from {version.ref}"
          + (f"; what it held before is kept as {saved.ref}" if saved else ""))
    return 0
