"""The memory flush's own guard: a bare "Done" or a silent answer asked once for the notes.

A weak model answers every flush with ``NO_REPLY`` or "Done." and writes nothing, though the
user told it things since the conversation's last note (``context.flush.should_ask_again``).
``FlushRetry`` asks it once more, naming today's daily log (``flush_retry_prompt``); the
flush then keeps only the list lines of that second answer. It runs in the same loop of
steps as a user's turn (``loop.steps``), beside the step guards the profile holds for
the flush (``profile.Profile.flush_guards``).
"""

from __future__ import annotations

from datetime import date

from clawd.context.flush import flush_retry_prompt, noted, should_ask_again
from clawd.core.messages import Message
from clawd.core.thresholds import DEFAULT, Thresholds
from clawd.guards.base import AskAgain, Guard, TurnView


class FlushRetry(Guard):
    name = "flush_retry"

    def __init__(self, conversation: list[Message], today: date, *, summarised: bool,
                 tuning: Thresholds = DEFAULT):
        """``conversation``: what the flush sees, before its own prompt; ``summarised``:
        earlier messages were compacted (notes may have been written before them)."""
        super().__init__(tuning)
        self.conversation, self.today, self.summarised = conversation, today, summarised

    def answer(self, reply: Message, turn: TurnView) -> AskAgain | None:
        if not should_ask_again(reply.text, turn.wrote, self.conversation):
            return None
        ask = flush_retry_prompt(reply.text, self.today, noted(self.conversation),
                                 summarised=self.summarised)
        return AskAgain(self.name, Message.user(ask, flush=True))
