"""What the provider adapters share: the retry loop, backoff, error wording, tool-call pairing.

``retrying_stream`` runs one streamed call and retries transient failures (rate limits,
server errors, dropped connections, timeouts) with exponential backoff and jitter, honouring
``retry-after``, but only until the first text delta has been handed to the caller: after
that a failure is reported, because the caller already showed part of the reply. The policy
pieces (``backoff_delay``, ``parse_retry_after``, ``is_overflow_text``, ``stop_reason``) are
pure functions so they can be tested from tables. ``pair_tool_calls`` makes a history safe to
send: both APIs reject a tool call without a result and a result without its call.
"""

from __future__ import annotations

import dataclasses
import email.utils
import logging
import random
import re
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from clawd.core.errors import ContextOverflowError, ProviderError, ProviderSetupError
from clawd.core.messages import Message, ModelRequest, ModelResponse, TextDelta, TextPart
from clawd.core.textcut import shorten

log = logging.getLogger(__name__)

MAX_BACKOFF = 30.0
MAX_RETRY_AFTER = 120.0
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})
INTERRUPTED_RESULT = "(no result: the tool call was interrupted)"
INTERRUPTED_REPLY = "\n[this reply was cut off here]"

# Phrases by which providers (and the servers that imitate them) say a request did not fit:
# Anthropic, OpenAI, llama.cpp's server (HTTP 400 ``exceed_context_size_error``: "request
# (9030 tokens) exceeds the available context size (8192 tokens)"), Ollama ("input length
# exceeds the context length", "prompt too long; exceeded max context length"), vLLM
# ("maximum context length is", "is too long to fit into the model", "... exceeds limit
# of"), LM Studio ("context length of only N tokens, which is not enough", "greater than the
# context length"), and proxies ("Request exceeds the maximum size", "Context overflow",
# "413 Request Entity Too Large", "Payload Too Large", even when the status is another).
OVERFLOW_PATTERNS = tuple(re.compile(p, re.I) for p in (
    r"prompt is too long",
    r"request_too_large",
    r"context_length_exceeded",
    r"maximum context length",
    r"too many tokens",
    r"exceeds? (the )?(model'?s? )?(available )?context (window|size|length)",
    r"context (window|length) (exceeded|is exceeded)",
    r"input length and `?max_tokens`? exceed context limit",
    r"exceed_context_size",
    r"input length exceeds (the )?(maximum )?context length",
    r"exceeded max(imum)? context length",
    r"too long to fit into the model",
    r"prompt \(\d+ tokens\) is too long and exceeds limit",
    r"maximum model length is",
    r"context length of only \d+ tokens",
    r"greater than the context length",
    r"request exceeds the maximum size",
    r"request entity too large",  # HTTP 413 as a proxy words it, also inside another error
    r"payload too large",
    r"context overflow",
))

STOP_REASONS = {
    "end_turn": "stop", "stop_sequence": "stop", "stop": "stop",
    "tool_use": "toolUse", "tool_calls": "toolUse", "function_call": "toolUse",
    "max_tokens": "length", "length": "length", "model_context_window_exceeded": "length",
}


def stop_reason(raw: str | None) -> str | None:
    """``stop`` | ``toolUse`` | ``length``, or the provider's own word for anything else."""
    if raw is None:
        return None
    return STOP_REASONS.get(raw, raw)


def is_overflow_text(text: str) -> bool:
    """Whether an error message says the request was larger than the context window."""
    return any(p.search(text or "") for p in OVERFLOW_PATTERNS)


def is_retryable_status(status: int | None) -> bool:
    return status is not None and (status in RETRYABLE_STATUS or status >= 500)


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None
                      ) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``retry-after`` (seconds or an HTTP date)."""
    if not headers:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    now = time.time() if now is None else now
    return max(0.0, email.utils.mktime_tz(parsed) - now)


def backoff_delay(attempt: int, base: float, retry_after: float | None = None,
                  jitter: float = 0.0) -> float:
    """The wait before retry number ``attempt`` (0-based).

    Exponential from ``base`` with up to 25% added jitter (``jitter`` in [0, 1)), capped at
    ``MAX_BACKOFF``; a server's ``retry-after`` wins when it is given (capped at
    ``MAX_RETRY_AFTER`` so a confused server cannot park the loop for hours).
    """
    if retry_after is not None:
        return min(retry_after, MAX_RETRY_AFTER)
    delay = base * (2 ** attempt)
    return min(delay * (1 + 0.25 * jitter), MAX_BACKOFF)


def one_line(text: str, limit: int = 300) -> str:
    """Collapse whitespace so a message fits on one line; cut it at ``limit`` characters."""
    flat = " ".join(str(text).split())
    return shorten(flat, limit)


def status_error(name: str, status: int | None, message: str, *, kind: str | None = None,
                 retryable: bool | None = None) -> ProviderError:
    """The ``ProviderError`` (or ``ContextOverflowError``) for an HTTP error reply."""
    detail = one_line(message)
    # A rate limit may speak of "too many tokens" per minute: that is a wait, not an overflow.
    # (A server error that says the prompt did not fit is an overflow: Ollama answers 500.)
    transient = status == 429
    if status == 413 or kind == "request_too_large" or (
            not transient and is_overflow_text(f"{kind or ''} {message}")):
        return ContextOverflowError(f"{name}: context overflow: {detail}", status=status)
    if retryable is None:
        retryable = is_retryable_status(status)
    label = f"HTTP {status}" if status else "error"
    if kind:
        label += f" {kind}"
    hint = ""
    if status in (401, 403):
        hint = " (check the API key)"
    elif status == 404:
        hint = " (check the model id and baseUrl)"
    return ProviderError(f"{name}: {label}: {detail}{hint}", retryable=retryable,
                         status=status)


def transport_error(name: str, exc: BaseException, base_url: Any = None) -> ProviderError:
    """The ``ProviderError`` for a failure below HTTP: refused, dropped, timed out, or other."""
    import sys

    where = f" {base_url}" if base_url else ""
    for module_name in ("httpx2", "httpx"):  # whichever HTTP stack the SDK in use loaded
        module = sys.modules.get(module_name)
        if module is None:
            continue
        if isinstance(exc, module.TimeoutException):
            return ProviderError(f"{name}: no reply from{where} in time", retryable=True)
        if isinstance(exc, module.ConnectError):
            return ProviderError(f"{name}: cannot connect to{where}: {one_line(str(exc))} "
                                 f"(is the server running? clawd doctor checks it)",
                                 retryable=True)
        if isinstance(exc, module.TransportError):
            return ProviderError(f"{name}: connection lost: {one_line(str(exc))}",
                                 retryable=True)
    if isinstance(exc, TimeoutError):
        return ProviderError(f"{name}: no reply from{where} in time", retryable=True)
    if isinstance(exc, ConnectionError):
        return ProviderError(f"{name}: connection lost: {one_line(str(exc))}", retryable=True)
    return ProviderError(f"{name}: unexpected {type(exc).__name__}: {one_line(str(exc))}")


class RetryInfo:
    """Carries ``retry-after`` from a converted error to the retry loop."""

    def __init__(self, error: ProviderError, retry_after: float | None = None):
        self.error = error
        self.retry_after = retry_after


RetryHook = Callable[[ProviderError, int, float], None]


def retrying_stream(name: str, attempt_events: Callable[[], Iterator[TextDelta | ModelResponse]],
                    convert: Callable[[Exception], RetryInfo], *, max_retries: int,
                    base_delay: float, sleep: Callable[[float], None] = time.sleep,
                    rng: Callable[[], float] = random.random,
                    on_retry: RetryHook | None = None) -> Iterator[TextDelta | ModelResponse]:
    """Run ``attempt_events`` and retry transient failures until the first delta is out.

    ``attempt_events`` performs one full call (a fresh generator each time); ``convert``
    turns whatever it raised into a ``RetryInfo``. Errors raised after text was yielded
    become one non-retryable ``ProviderError`` saying the reply broke off. ``on_retry``
    hears of each retry (error, retry number, delay) so a front end can say why it waits.
    """
    attempt = 0
    while True:
        yielded = False
        info: RetryInfo | None = None
        events = attempt_events()
        try:
            while True:
                # next() sits alone in the try so exceptions thrown into this generator by
                # the caller (close(), throw()) are never mistaken for provider failures.
                try:
                    event = next(events)
                except StopIteration:
                    return
                except ProviderError as exc:
                    info = RetryInfo(exc)
                    break
                except Exception as exc:  # SDK and transport errors of every kind
                    info = convert(exc)
                    break
                if isinstance(event, TextDelta) and event.text:
                    yielded = True
                yield event
        finally:
            # also when the caller stops early: release the HTTP response now, not at GC
            close = getattr(events, "close", None)
            if close is not None:
                close()
        error = info.error
        if yielded:
            raise ProviderError(f"{name}: the reply broke off mid-stream: "
                                f"{_strip_name(name, str(error))}",
                                retryable=False, status=error.status) from None
        if not error.retryable or attempt >= max_retries:
            if error.retryable and max_retries:
                raise ProviderError(f"{error} (gave up after {attempt + 1} attempts)",
                                    retryable=True, status=error.status) from None
            raise error from None
        delay = backoff_delay(attempt, base_delay, info.retry_after, rng())
        # info, not warning: with no logging configured, warnings would land on the terminal
        log.info("%s: %s; retry %d of %d in %.1fs", name, error, attempt + 1, max_retries,
                 delay)
        if on_retry is not None:
            on_retry(error, attempt + 1, delay)
        sleep(delay)
        attempt += 1


def _strip_name(name: str, text: str) -> str:
    prefix = f"{name}: "
    return text[len(prefix):] if text.startswith(prefix) else text


def pair_tool_calls(messages: list[Message]) -> list[Message]:
    """The history with every tool call answered and every tool result attached to a call.

    A call left without a result (an aborted turn) gets an error result so the request is
    valid; a result whose call is gone (cut away earlier) is turned into a user note rather
    than dropped, so the model still sees what happened. A reply that was cut off (an error
    mid-stream, Ctrl-C) says so at its end, so the model does not take it as finished.
    """
    out: list[Message] = []
    pending: dict[str, str] = {}
    for message in messages:
        if message.role == "toolResult":
            if message.tool_call_id in pending:
                pending.pop(message.tool_call_id)
                out.append(message)
            else:
                out.append(Message.user(f"[result of tool {message.tool_name or '?'}]\n"
                                        f"{message.text}"))
            continue
        out.extend(_missing_results(pending))
        pending = {}
        if message.role == "assistant" and message.aborted and message.text:
            message = dataclasses.replace(message, content=[
                *message.content, TextPart(INTERRUPTED_REPLY)])
        out.append(message)
        if message.role == "assistant":
            pending = {call.id: call.name for call in message.tool_calls}
    out.extend(_missing_results(pending))
    return out


def _missing_results(pending: dict[str, str]) -> list[Message]:
    from clawd.core.messages import ToolCall
    return [Message.tool_result(ToolCall(call_id, tool_name, {}), INTERRUPTED_RESULT,
                                is_error=True) for call_id, tool_name in pending.items()]


def parse_arguments(raw: str) -> dict[str, Any]:
    """Tool-call arguments from the model's JSON text; invalid JSON is kept as ``_raw``."""
    import json

    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_raw": raw}


class SdkProvider:
    """What both SDK adapters share: identity, retry settings, the client, and streaming with
    retries. Subclasses name their ``sdk`` and implement ``_make_client``, ``_params``,
    ``_attempt`` (one streamed call) and ``_convert`` (SDK errors to ``ProviderError``)."""

    api = ""
    sdk = ""

    def __init__(self, model: str, *, api_key: str, base_url: str | None = None,
                 headers: Mapping[str, str] | None = None, name: str,
                 max_retries: int = 3, timeout: float = 120.0, retry_base_delay: float = 1.0,
                 sleep: Callable[[float], None] = time.sleep,
                 rng: Callable[[], float] = random.random, on_retry: RetryHook | None = None):
        self.name = name
        self.model = model
        self.base_url = base_url
        self.max_retries = max_retries
        self.timeout = timeout
        self.retry_base_delay = retry_base_delay
        self._sleep = sleep
        self._rng = rng
        self.on_retry = on_retry
        # The SDK's own retries are off: ours know about deltas already shown to the user.
        try:
            self._client = self._make_client(api_key, base_url, dict(headers or {}) or None,
                                             timeout)
        except Exception as exc:  # a missing package or a client that refuses its settings
            raise ProviderSetupError(f"{name}: cannot set up the {self.sdk} client: "
                                     f"{one_line(str(exc))}") from exc

    def stream(self, request: ModelRequest) -> Iterator[TextDelta | ModelResponse]:
        params = self._params(request)
        yield from retrying_stream(self.name, lambda: self._attempt(params), self._convert,
                                   max_retries=self.max_retries,
                                   base_delay=self.retry_base_delay, sleep=self._sleep,
                                   rng=self._rng, on_retry=self.on_retry)

    def _make_client(self, api_key: str, base_url: str | None,
                     headers: dict[str, str] | None, timeout: float) -> Any:
        raise NotImplementedError

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        raise NotImplementedError

    def _attempt(self, params: dict[str, Any]) -> Iterator[TextDelta | ModelResponse]:
        raise NotImplementedError

    def _convert(self, exc: Exception) -> RetryInfo:
        raise NotImplementedError

    def check(self, timeout: float = 10.0) -> tuple[bool, str]:
        """One cheap request (the server's model list, no tokens spent): (usable, what was
        seen). A refused key or an unreachable server (named by the base URL tried, with the
        failure below the SDK's "Connection error.") is not usable; any other answer means
        the server is there."""
        try:
            listed = self._client.with_options(timeout=timeout, max_retries=0).models.list()
            ids = [getattr(m, "id", "") for m in getattr(listed, "data", None) or []]
        except Exception as exc:  # noqa: BLE001 - every failure becomes one line
            status = getattr(exc, "status_code", None)
            if status in (401, 403):
                return False, f"the key was refused (HTTP {status})"
            if status is not None:
                return True, f"reachable (HTTP {status} to the model list)"
            cause = exc.__cause__ or exc  # "[Errno 111] Connection refused", not the SDK's
            return False, (f"unreachable at {self._client.base_url}: "
                           f"{one_line(str(cause)) or type(cause).__name__}")
        if not ids or self.model in ids:
            return True, "reachable" + (f", {self.model} listed" if ids else "")
        return False, f"reachable, but {self.model} is not among its {len(ids)} models"
