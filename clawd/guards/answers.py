"""Guards on a final answer: blank, echoing, or claiming a note that was never written.

- ``BlankAnswer``: an empty or ``NO_REPLY`` answer to the user is asked again once, in
  words, with the user's message repeated (a weak model answered a system-prompt nudge with
  nothing 6 times of 6, and a repeated message with words 6 of 6). Not after a reply was
  already shown in the turn: that reply stands.
- ``EchoAnswer``: an answer that only repeats the user's message (``replytext.is_echo``),
  or only the statement a request to keep asked to keep (``restates``),
  copies the instructions the model was given (``replytext.copies``) or the recalled-notes
  block with its headers (``replytext.dumps_notes``), or repeats the answer before it to
  another message (``replytext.repeats_answer``), is asked again once, tools allowed. The
  last two are held back while they stream, never shown, and asked again even when they
  hold a claim of a note.
- ``UnkeptNote``: an answer that says a note was saved when no file was written in the turn
  (``claims.note_claim``) is asked once for that write; if it is still not made, the turn
  ends with a notice saying so, and words the model answered instead (often the claim
  again) are not shown.

The blank and echoing answers leave the history (kept on disk, marked ``retried``); a claim
stays, since the user saw it. An echo answering the request for a blank answer (which
repeats the user's message, and a 1.5B model repeated it back) is asked again too; a blank
answer after an echo is not (``MAX_ASKS`` caps them all).
"""

from __future__ import annotations

from clawd.context.facts import facts, kept_statement
from clawd.context.flush import is_blank, is_silent
from clawd.context.replytext import copies, dumps_notes, is_echo, repeats_answer
from clawd.core.messages import Message
from clawd.core.templates import render
from clawd.core.textcut import sentences, shorten
from clawd.core.thresholds import DEFAULT, Thresholds
from clawd.guards.base import AskAgain, Guard, TurnView
from clawd.guards.claims import asks_to_note, note_claim


def unkept_notice(claim: str) -> str:
    """The one line shown when the reply said a note was saved and no file was written."""
    return f'the model said "{shorten(claim, 80)}" but wrote no note'


class BlankAnswer(Guard):
    name = "blank"

    def answer(self, reply: Message, turn: TurnView) -> AskAgain | None:
        if not is_blank(reply.text) or turn.shown or turn.asked_by(EchoAnswer):
            return None
        ask = render("blank_retry.md.j2", kind="silent" if is_silent(reply.text) else "empty",
                     request=shorten(turn.text, 1000))
        return AskAgain(self.name, Message.user(ask), drop=True, tool_choice="none",
                        why="the reply was empty")


ECHO_WHY = {"repeat": "the reply repeated the answer before",
            "notes": "the reply copied the recalled notes",
            "instructions": "the reply copied the instructions",
            "echo": "the reply only repeated your message"}


class EchoAnswer(Guard):
    name = "echo"

    def will_ask_again(self, held: str) -> bool:
        return dumps_notes(held)  # a header line of the notes: asked again, never shown

    def answer(self, reply: Message, turn: TurnView) -> AskAgain | None:
        if is_blank(reply.text):
            return None
        # copied words, never shown, so no claim in them to ask on
        kind = ("repeat" if repeats_answer(reply.text, turn.text, turn.messages, self.tuning) else
                "notes" if dumps_notes(reply.text) else None)
        if kind is None:
            kind = ("instructions" if copies(reply.text, turn.instructions, turn.text,
                                             self.tuning) else
                    "echo" if (is_echo(reply.text, turn.text, self.tuning)
                               or restates(reply.text, turn.text, self.tuning))
                    else None)
            if kind is None or unkept_claim(reply, turn):
                return None
        ask = render("blank_retry.md.j2", kind=kind, request=shorten(turn.text, 1000))
        return AskAgain(self.name, Message.user(ask), drop=True, why=ECHO_WHY[kind])


def restates(reply: str, message: str, tuning: Thresholds = DEFAULT) -> bool:
    """Whether ``reply`` is only the statement a request to keep asked to keep, said back
    ("The gym is open until 22:00." to "Please remember that my gym is open until 22:00."):
    nothing tells the user it was kept, or answers them."""
    kept = (kept_statement(s) for s in sentences(message))
    return any(is_echo(reply, statement, tuning) for statement in kept if statement)


def unkept_claim(reply: Message, turn: TurnView) -> str | None:
    """The sentence of a reply that says a note was saved when no write of the turn made
    one, else None. Such a reply is the claim guard's, echo or not: it asks for the write
    ("I remember that your daughter's play is on 12 December." repeats "Remember that my
    daughter's play is on 12 December." but says it was kept)."""
    if turn.wrote or not turn.offers_writes or is_blank(reply.text):
        return None
    told = turn.text if facts(turn.text) else ""
    return note_claim(reply.text, asked=asks_to_note(turn.text), told=told)


class UnkeptNote(Guard):
    name = "note_claim"

    def answer(self, reply: Message, turn: TurnView) -> AskAgain | None:
        claim = unkept_claim(reply, turn)
        if claim is None:
            return None
        ask = render("unkept_note.md.j2", claim=claim, daily_log=turn.daily_log)
        return AskAgain(self.name, Message.user(ask), unmet=unkept_notice(claim), quiet=True)

    def unmet(self, turn: TurnView) -> str | None:
        asked = turn.asked.get(self.name)
        return asked.unmet if asked is not None and not turn.wrote else None
