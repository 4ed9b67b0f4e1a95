"""The provider protocol every model adapter implements.

``stream(request)`` yields ``TextDelta`` events as text arrives and ends with exactly one
``ModelResponse`` holding the full assistant message (text, tool calls, usage, stop reason).
Failures are raised as ``ProviderError`` (retryable or not, overflow or not); adapters retry
transient errors themselves before the first byte of a reply has been yielded.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, runtime_checkable

from clawd.core.messages import ModelRequest, ModelResponse, TextDelta


@runtime_checkable
class Provider(Protocol):
    """A model the loop can call."""

    name: str
    model: str

    def stream(self, request: ModelRequest) -> Iterator[TextDelta | ModelResponse]:
        """Send one request; yield text deltas, then one ``ModelResponse``."""
        ...


def complete(provider: Provider, request: ModelRequest) -> ModelResponse:
    """Run a request to the end without streaming to anyone; return the final response."""
    final: ModelResponse | None = None
    for event in provider.stream(request):
        if isinstance(event, ModelResponse):
            final = event
    if final is None:
        from clawd.core.errors import ProviderError
        raise ProviderError(f"{provider.name}: the stream ended without a response")
    return final
