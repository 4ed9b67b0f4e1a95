"""A scripted provider: the test double for the loop, shipped in the package.

Queue replies (text, tool calls, errors, or functions of the request) and the provider plays
them back in order, streaming text in small pieces and recording every request it was sent,
so tests can assert what the model saw. ``assert_done()`` checks that every reply was used.
Usage is computed from the request with the loop's own estimator, unless told to count
differently: ``token_ratio`` scales it (a provider whose tokenizer yields more or fewer tokens
than clawd's estimate) and ``count`` replaces it (another tokenizer altogether). The count
is what the provider reports and what its ``context_window`` is checked against, so tests
can tell whether the loop follows the provider's numbers or merely its own estimates.
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from clawd.core.errors import ProviderError
from clawd.core.messages import (
    Message,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ToolCall,
    Usage,
    new_id,
)
from clawd.core.tokens import estimate_request


@dataclass
class Reply:
    """One scripted model answer."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    stop_reason: str | None = None
    usage: Usage | None = None


Step = Reply | str | BaseException | Callable[[ModelRequest], Any]


def tool(name: str, **arguments: Any) -> ToolCall:
    """A tool call for a scripted reply."""
    return ToolCall(id=f"call_{new_id()}", name=name, arguments=arguments)


class ScriptedProvider:
    """Plays back queued replies; records requests."""

    def __init__(self, steps: list[Step] | None = None, *, model: str = "scripted",
                 name: str = "scripted", default: Step | None = None,
                 chunk_size: int = 8, context_window: int | None = None,
                 token_ratio: float = 1.0,
                 count: Callable[[ModelRequest], int] | None = None):
        self.name = name
        self.model = model
        self.steps: list[Step] = list(steps or [])
        self.default = default
        self.requests: list[ModelRequest] = []
        self.chunk_size = chunk_size
        self.context_window = context_window
        self.token_ratio = token_ratio
        self._count = count or estimate_request

    def count(self, request: ModelRequest) -> int:
        """The prompt's size in this provider's tokens."""
        return round(self._count(request) * self.token_ratio)

    def add(self, *steps: Step) -> ScriptedProvider:
        self.steps.extend(steps)
        return self

    def stream(self, request: ModelRequest) -> Iterator[TextDelta | ModelResponse]:
        self.requests.append(_snapshot(request))
        if self.steps:
            step = self.steps.pop(0)
        elif self.default is not None:
            step = self.default
        else:
            raise ProviderError("scripted provider: no reply queued for this request")
        if callable(step) and not isinstance(step, BaseException):
            step = step(request)
        if isinstance(step, BaseException):
            raise step
        reply = Reply(text=step) if isinstance(step, str) else step
        if self.context_window is not None:
            prompt = self.count(request)
            if prompt > self.context_window:
                from clawd.core.errors import ContextOverflowError
                raise ContextOverflowError(
                    f"prompt is too long: {prompt} tokens > {self.context_window} maximum")
        for i in range(0, len(reply.text), self.chunk_size):
            yield TextDelta(reply.text[i:i + self.chunk_size])
        usage = reply.usage or Usage(input_tokens=self.count(request),
                                     output_tokens=max(1, len(reply.text) // 4))
        stop = reply.stop_reason or ("toolUse" if reply.tool_calls else "stop")
        message = Message.assistant(reply.text, reply.tool_calls, usage=usage,
                                    stop_reason=stop, model=self.model)
        yield ModelResponse(message)

    def assert_done(self) -> None:
        if self.steps:
            raise AssertionError(f"{len(self.steps)} scripted replies were never used")


def _snapshot(request: ModelRequest) -> ModelRequest:
    """A deep copy of ``request``, as it was sent: the loop may change its messages later.
    A pickle round trip copies these plain dataclasses a few times faster than
    ``copy.deepcopy``; anything pickle cannot take is deep-copied instead."""
    try:
        return pickle.loads(pickle.dumps(request, pickle.HIGHEST_PROTOCOL))
    except Exception:  # noqa: BLE001 - whatever pickle refuses, deepcopy still copies
        return copy.deepcopy(request)
