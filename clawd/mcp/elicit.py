"""A server's question to the person during a call (MCP elicitation), as pure functions: in
form mode the fields it asks for and the answers typed for them, in URL mode the web page it
asks the person to open, as it may be shown (``link``).

A server may ask, in the middle of a tool call, for a few values (a flat object of strings,
numbers, booleans and choices: ``requested_schema``). Where a person can answer (the REPL:
``McpClients.elicit``), each field is asked in turn (``fields``) and each answer read as its
type (``coerce``); where nobody can, or the person gives up, the answer is "decline", and the
server goes on without. The server's words reach the terminal cleaned of control characters
(``clean``): they are its text, not clawd's.

A page to open (``Link``) is shown only when its address is http(s) with a host (``link``),
its host set apart in ASCII so a look-alike name shows; any other address is refused with a
one-line note. A call refused until the person has been to a page (-32042) names its pages
in the error's data (``required_links``), and its result says in one line that the person
was asked (``required_note``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
TRUE, FALSE = ("y", "yes", "true", "1"), ("n", "no", "false", "0")


@dataclass(frozen=True)
class Field:
    name: str
    kind: str  # string | number | integer | boolean
    description: str
    required: bool
    choices: tuple[str, ...] = ()
    default: Any = None

    def prompt(self) -> str:
        """What the person is asked for this field."""
        said = f"{self.name}" + (f" ({self.description})" if self.description else "")
        hint = ("/".join(self.choices) if self.choices else "y/n" if self.kind == "boolean"
                else self.kind)
        extra = f", default {self.default}" if self.default is not None else (
            "" if self.required else ", Enter to skip")
        return f"{said} [{hint}{extra}]: "


def clean(text: str, limit: int = 500) -> str:
    """A server's text as it may be shown: no control characters, one line, cut."""
    text = " ".join(_CONTROL.sub("", text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def fields(schema: Any) -> list[Field]:
    """The fields of a ``requested_schema`` (a dict, or the SDK's object)."""
    if not isinstance(schema, dict):
        schema = schema.model_dump(by_alias=True, exclude_none=True) if schema else {}
    required = set(schema.get("required") or [])
    found = []
    for name, prop in (schema.get("properties") or {}).items():
        prop = prop if isinstance(prop, dict) else {}
        choices = tuple(str(c) for c in prop.get("enum") or ())
        found.append(Field(clean(str(name), 64), str(prop.get("type") or "string"),
                           clean(str(prop.get("description") or prop.get("title") or ""), 200),
                           name in required, choices, prop.get("default")))
    return found


def coerce(field: Field, text: str) -> Any:
    """The answer ``text`` as ``field``'s value (None: skipped); a ``ValueError`` saying what
    is expected when it is not one."""
    text = text.strip()
    if not text:
        if field.default is not None:
            return field.default
        if field.required:
            raise ValueError(f"{field.name} is required")
        return None
    if field.choices:
        if text not in field.choices:
            raise ValueError(f"one of {', '.join(field.choices)}")
        return text
    if field.kind == "boolean":
        if text.lower() in TRUE + FALSE:
            return text.lower() in TRUE
        raise ValueError("y or n")
    if field.kind in ("number", "integer"):
        try:
            return int(text) if field.kind == "integer" else float(text)
        except ValueError:
            raise ValueError(f"a{'n integer' if field.kind == 'integer' else ' number'}") from None
    return text


WEB = ("http", "https")
URL_CHARS = 4096
YES = ("y", "yes")
ACTIONS = ("accept", "decline", "cancel")


@dataclass(frozen=True)
class Link:
    """A server's question in URL mode: a web page for the person to open (``link``).
    ``refused`` says why it is not shown (then it is declined without asking)."""

    server: str
    message: str  # cleaned
    url: str  # "" when refused
    host: str  # in ASCII (an internationalised name as its xn-- form)
    refused: str = ""

    def lines(self) -> list[str]:
        """What the terminal shows before "open it?": the message, the URL, its host."""
        odd = " (an internationalised name: check it is the one you expect)" if (
            "xn--" in self.host) else ""
        return [f"{self.server} asks you to open a web page: {self.message}",
                f"  {self.url}", f"  host: {self.host}{odd}"]


def link(server: str, message: str, url: str) -> Link:
    """A server's URL-mode question as it may be shown: its message cleaned, the URL's host
    in ASCII. Only an http(s) URL with a host, no spaces or control characters and at most
    ``URL_CHARS`` long is shown; any other (``javascript:``, ``file:``, ``data:``…) is
    refused, with a one-line note."""
    from urllib.parse import urlsplit

    said = clean(message)
    try:
        parts = urlsplit(url)
        scheme, host = parts.scheme.lower(), parts.hostname or ""
    except ValueError:
        scheme, host = "", ""
    why = (f"{clean(scheme, 20)}: is not http(s)" if scheme and scheme not in WEB
           else "it is not an http(s) address" if scheme not in WEB
           else "it has spaces or control characters" if (
               _CONTROL.search(url) or any(c.isspace() for c in url))
           else f"it is over {URL_CHARS} characters" if len(url) > URL_CHARS
           else "it names no host" if not host else "")
    if why:
        return Link(server, said, "", "", f"{server} sent a link clawd does not show "
                                          f"({why}); declined")
    try:
        host = host.encode("idna").decode("ascii")
    except UnicodeError:
        host = clean(host, 255)
    return Link(server, said, url, host)


def required_links(server: str, data: Any) -> list[Link]:
    """The links of a call's ``URLElicitationRequired`` error (-32042): its ``data``'s
    ``elicitations``, each as ``link`` reads it."""
    found = data.get("elicitations") if isinstance(data, dict) else None
    return [link(server, str(e.get("message") or ""), str(e.get("url") or ""))
            for e in (found if isinstance(found, list) else []) if isinstance(e, dict)]


def required_note(server: str, tool: str, links: list[Link], actions: list[str]) -> str:
    """The tool result of a call that needs the person on a web page first (-32042): one
    line for the model, saying they were asked and what they answered."""
    if not links:
        return f"{server}: {tool} needs the person to finish something on a web page first, " \
               f"and the server named no page"
    hosts = ", ".join(sorted({lk.host or "a link clawd does not show" for lk in links}))
    said = ("they agreed: the call may be retried once they have finished there"
            if "accept" in actions else f"they did not ({', '.join(sorted(set(actions)))}): "
            f"the call is refused until they do")
    return (f"{server}: {tool} needs the person to finish something on a web page first "
            f"({hosts}); the person was asked to open it, and {said}")
