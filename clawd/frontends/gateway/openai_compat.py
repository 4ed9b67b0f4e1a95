"""The OpenAI-compatible routes (placeholder until they are built)."""

from __future__ import annotations

ROUTES: list = []
