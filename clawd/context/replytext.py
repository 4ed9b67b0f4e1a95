"""What of a model's reply text is kept and shown (pure functions).

Small local models leave text in their replies that, sent back in the history, teaches
them a habit for the rest of the conversation:

- Beside a tool call, llama.cpp keeps what Qwen wrote before its call: a lone ``{``, or the
  call's own arguments as JSON. After a lone ``{`` in its history the 1.5B model answered
  every later message as a JSON object. Such text (``is_stray``) is neither shown nor kept.
- Qwen's chat template hands a tool's result to the model between ``<tool_response>``
  tags. Echoing a result in its answer, the model wrote those tags too, and from then on
  started every answer with ``<tool_response>``. The template also lists the tools between
  ``<tools>`` tags, and one first answer was ``<tools></tools>``, copied as the answer to
  every later message of that conversation. The tags are dropped from the kept text
  (``without_echoed_tags``); the words between them stay, and a reply that was nothing
  but tags is a blank one.
- Told "By the way, my budget is 2400 euros in total.", the 1.5B model sometimes answers
  with that very sentence, and with the echo in its history it echoes the next statement
  too. Such a reply (``is_echo``) is asked again, like a blank one.
- Asked "Where do I live, and what is my cat called?" with notes recalled, the 1.5B model
  answered with the recalled block itself, its "From memory/…#L1-L12 (lines 1-12):"
  headers and all, and went on to write more of the conversation ("**user** …: What is my
  cat called? **assistant** …"); another answer began as a saved conversation's line
  ("**assistant** (2026-11-27 15:08):"). A reply that starts like that block or such a
  line (``recall_start``) is held back while it streams, and one holding such lines
  (``dumps_notes``) is asked again.
- After one answer "To keep this information, I will write it down in
  `memory/2026-11-27.md` with `write` and `append: true`. Here's the command:", the 1.5B
  model gave that same answer to each of the next fourteen messages (itineraries, packing
  lists, questions). An answer that repeats the answer before it (``repeats_answer``) to
  another message is asked again; while a reply streams as the start of that answer it
  is held back (``SilentFilter``), so a repeat is never shown.
- Told "Remember that my daughter's school play is on 12 December", the 1.5B model answered
  with AGENTS.md's own rule about "remember this" ("… write it down now, in the right file,
  and say where. Never promise to keep something "in your head" …"), and again at the next
  statement. A reply that copies the instructions it was given (``copies``) is asked again
  too, unless the message asks about them.

The numbers these judge by (how long an echoed message is, how alike, how much of a copy)
are the weak profile's (``core.thresholds``), given as ``tuning`` by the echo guard.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

from clawd.core.messages import Message
from clawd.core.phrases import talk
from clawd.core.thresholds import DEFAULT, Thresholds
from clawd.memory.chunker import FENCE_RE

_ECHOED_TAG = re.compile(r"[ \t]*</?(?:tool_response|tools)>[ \t]*\n?")


def unfenced(text: str) -> str:
    """``text`` without a code fence around it and the fence's ``json`` tag."""
    body = text.strip().strip("`").strip()
    return body[4:].lstrip() if body.startswith("json") else body


def is_stray(text: str) -> bool:
    """Whether text beside a tool call says nothing of its own: no letter or digit, or a
    JSON object (the call's arguments again)."""
    body = text.strip()
    if body.startswith("```"):
        body = unfenced(body)
    return bool(body) and (not any(c.isalnum() for c in body)
                           or (body.startswith("{") and body.endswith("}")))


def without_echoed_tags(text: str) -> str:
    """``text`` without the ``<tool_response>`` and ``<tools>`` tags a model copied from
    its chat template; inside a code block they are the answer's own (XML asked for) and
    stay."""
    if not _ECHOED_TAG.search(text):
        return text
    out, fenced = [], False
    for line in text.splitlines(keepends=True):
        if FENCE_RE.match(line):  # a code block's fences, as memory reads them
            fenced = not fenced
        elif not fenced:
            line = _ECHOED_TAG.sub("", line)
        out.append(line)
    return "".join(out).strip()


def _plain(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def is_echo(reply: str, message: str, tuning: Thresholds = DEFAULT) -> bool:
    """Whether ``reply`` only repeats the user's ``message`` of at least ``echo_words`` words
    (its words, in order, at least ``echo_likeness`` alike: 90%; a quote inside a longer
    answer is not an echo, and "Hello!" is a fine answer to "hello")."""
    said, heard = _plain(reply), _plain(message)
    if not said or heard.count(" ") + 1 < tuning.echo_words:
        return False
    matcher = SequenceMatcher(None, said, heard, autojunk=False)
    # the two quick ratios are upper bounds of ratio(): most replies fail them at once,
    # without the full comparison
    alike = tuning.echo_likeness
    return (matcher.real_quick_ratio() >= alike
            and matcher.quick_ratio() >= alike and matcher.ratio() >= alike)


def last_answer(messages: list[Message]) -> tuple[str, str] | None:
    """(the answer, the user's message it answered) of the turn before the last user
    message of ``messages``, or None: the text of that turn's last assistant message."""
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    if len(users) < 2:
        return None
    before, current = users[-2], users[-1]
    answers = [m.text for m in messages[before + 1:current]
               if m.role == "assistant" and m.text.strip()]
    return (answers[-1], messages[before].text) if answers else None


def repeats_answer(reply: str, message: str, messages: list[Message],
                   tuning: Thresholds = DEFAULT) -> bool:
    """Whether ``reply`` (of ``echo_words`` words or more) is the answer before it again,
    word for word (case and punctuation aside), given to another ``message`` (the same
    question may get the same answer)."""
    last = last_answer(messages)
    said = _plain(reply)
    if (last is None or said.count(" ") + 1 < tuning.echo_words
            or _plain(last[1]) == _plain(message)):
        return False
    return said == _plain(last[0])


def runs(words: list[str], size: int = 4) -> list[tuple[str, ...]]:
    """The runs of ``size`` words in a row of ``words``, in order (what a copy shares)."""
    return [tuple(words[i:i + size]) for i in range(len(words) - size + 1)]


def copies(reply: str, instructions: str, message: str, tuning: Thresholds = DEFAULT) -> bool:
    """Whether ``reply`` (of ``copy_words`` words or more: a shorter one may share a phrase
    with the instructions by chance) is mostly the ``instructions`` the model was given,
    copied: ``copy_share`` of its runs of four words are theirs. Not when the user's
    ``message`` asks about them (a file, the rules, the prompt): then a quote is the
    answer."""
    words = _plain(reply).split()
    if (len(words) < tuning.copy_words or not instructions
            or talk.ABOUT_INSTRUCTIONS.search(message)):
        return False
    given = set(runs(_plain(instructions).split()))
    own = runs(words)
    return sum(run in given for run in own) >= tuning.copy_share * len(own)


# the recalled-notes block's own lines (prompts/recall.md.j2), and the lines of a saved
# conversation it may hold (``**user** (2026-11-27 13:34):``), which no answer repeats
_RECALL_HEAD = re.compile(r"^\W*(?:\[Notes from your memory files|\[Found in your memory files|"
                          r"\[End of the notes|"
                          r"From [^\s#]+#L\d+(?:-L\d+)? \(lines? \d|"
                          r"(?:user|assistant)\*\* \(\d{4}-\d\d-\d\d \d\d:\d\d\):)",
                          re.MULTILINE)
_RECALL_OPENINGS = ("[Notes from your memory files", "[Found in your memory files", "user** (",
                    "assistant** (")


def recall_start(probe: str) -> bool:
    """Whether streamed text (its start, without the emphasis marks before it) is, or may
    still become, a line of the recalled-notes block: a prefix of its opening or of a saved
    conversation's line, or "From " and a citation (``path#L…``) or a word not yet
    ended."""
    if any(o.startswith(probe) or probe.startswith(o) for o in _RECALL_OPENINGS) \
            or "From ".startswith(probe):
        return True
    first = re.match(r"From (\S*)(\s?)", probe)
    return first is not None and (not first.group(2) or "#L" in first.group(1))


def dumps_notes(reply: str) -> bool:
    """Whether ``reply`` holds a header line of the recalled-notes block: the block
    copied as an answer."""
    return bool(_RECALL_HEAD.search(reply))
