"""The English of a model's short answers about notes, as the memory flush reads them.

Used by ``context.flush``: a bare acknowledgement ("Done.", "OK, noted!": ``ACK_WORDS``), a
list line that only says there is nothing to note ("- No additional notes to store.":
``NOTHING_WORDS``, with one of ``phrases.NONE_WORDS``), and a note line that opens with
the model speaking of the fact rather than the fact ("- I remember Sam is vegetarian.":
``SELF_TALK``, after the line's list mark).
"""

from __future__ import annotations

# the words of a bare acknowledgement: an answer made only of them wrote nothing and says
# nothing worth keeping
ACK_WORDS = frozenset("done ok okay noted saved sure got it understood all set yes thanks thank "
                      "you i have will nothing to store new".split())
# the words of a list line saying there is nothing to list ("- No additional notes to store.")
NOTHING_WORDS = ACK_WORDS | frozenset(
    "no none additional more other further notes note facts fact information save keep add "
    "there are is any was were from this the conversation user relevant found at time "
    "reply".split())
# "I remember Sam is vegetarian", "Noted: …": the model speaking of the fact, not the fact
SELF_TALK = r"(?:i (?:remember|recall|noted|know)|remember|noted?:)(?: that)?"
