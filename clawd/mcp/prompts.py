"""A server's prompts, for ``/mcp prompt``: listed at its start, fetched on demand and made
one message to send.

A prompt is a template the server fills (``prompts/get``) with the arguments the person
gives; its messages become the text of one user message (``as_message``: each message's
text, an assistant's marked as such; images and resources named). It is the person who picks
a prompt and sends it, so it is sent as theirs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_PAGES = 20


@dataclass(frozen=True)
class Prompt:
    server: str
    name: str
    description: str
    arguments: tuple[tuple[str, bool], ...]  # (name, required)

    def usage(self) -> str:
        said = " ".join(f"{n}=…" if required else f"[{n}=…]" for n, required in self.arguments)
        return f"{self.server}/{self.name}" + (f" {said}" if said else "")


async def list_prompts(client: Any, server: str) -> list[Prompt]:
    """The server's prompts, or none when it offers none."""
    if getattr(client.server_capabilities, "prompts", None) is None:
        return []
    found: list[Prompt] = []
    cursor = None
    for _ in range(MAX_PAGES):
        page = await client.list_prompts(cursor=cursor)
        found += [Prompt(server, p.name, " ".join((p.description or "").split())[:200],
                         tuple((a.name, bool(a.required)) for a in p.arguments or []))
                  for p in page.prompts]
        cursor = page.next_cursor
        if cursor is None:
            break
    return found


def as_message(result: Any) -> str:
    """A ``GetPromptResult`` as the text of one user message."""
    parts: list[str] = []
    for message in getattr(result, "messages", None) or []:
        content = message.content
        kind = getattr(content, "type", "")
        text = content.text if kind == "text" else f"[{kind or 'unknown'} content, not shown]"
        parts.append(text if message.role == "user" else f"(assistant) {text}")
    return "\n\n".join(parts)
