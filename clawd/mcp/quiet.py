"""What the SDK and its HTTP client would print on the terminal, kept off it.

The SDK logs a traceback for each line a server prints on stdout that is not JSON-RPC, and a
warning when an HTTP server forgets a session it is asked to end (``Session termination
failed: 404``): neither is the person's concern, so the ``mcp`` logger writes to
``<state>/logs/mcp.log`` instead of the terminal. ``httpx`` (and the SDK's ``httpx2``) log
each request's URL at ``-v``; a URL's query often holds a key (``?api_key=...``), so its
values are masked.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

HTTP_LOGGERS = ("httpx", "httpx2")  # the SDK's HTTP client is httpx2, a fork of httpx
_QUERY_VALUE = re.compile(r"([?&][^=&\s\"']+=)[^&\s\"']+")
_MARK = "clawd_quiet"


def mask_query(text: str) -> str:
    """``text`` with the value of every URL query parameter as ``***``."""
    return _QUERY_VALUE.sub(r"\1***", text)


class _MaskQuery(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = mask_query(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


def quiet(logs: Path | None) -> None:
    """Send the SDK's log lines to ``logs/mcp.log`` (nowhere without ``logs``; the last
    directory given wins) and mask the queries in ``httpx``'s."""
    sdk = logging.getLogger("mcp")
    old: logging.Handler | None = getattr(sdk, _MARK, None)
    if old is None:
        sdk.propagate = False
        for name in HTTP_LOGGERS:
            logging.getLogger(name).addFilter(_MaskQuery())
    elif logs is None or getattr(old, "baseFilename", None) == str(
            (logs / "mcp.log").absolute()):
        return
    handler: logging.Handler = logging.NullHandler()
    if logs is not None:
        try:
            logs.mkdir(parents=True, exist_ok=True)
            handler = logging.FileHandler(logs / "mcp.log", encoding="utf-8", delay=True)
            handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s "
                                                   "%(message)s"))
        except OSError:
            pass
    if old is not None:
        sdk.removeHandler(old)
        old.close()
    sdk.addHandler(handler)
    setattr(sdk, _MARK, handler)
