"""Phrases the runtime recognises in people's words, each list once, named for what it is.

The fact selector (``context.facts``), the request detector (``context.requests``), the
flush (``context.flush``) and the note guards (``guards.notes``) read the user's and the
model's sentences by their words, without a model. What they share lives here:

- ``FILLERS``: words before a sentence proper that change nothing ("So, please …", "Oh and
  also …", "One more thing: …"); ``LEADING_FILLERS`` matches the run of them (maybe
  none) at the start.
- ``KEEP_ELSEWHERE``: asking for something to be kept in German, French and Spanish ("Merk
  dir …", "N'oublie pas …", "Recuerda que …"), beside the English verbs of
  ``context.requests``.
- ``words``: a text's words, lower-cased, apostrophes kept ("don't", "I'm"; a curly one
  read as straight).

Pure data and functions.
"""

from __future__ import annotations

import re

FILLERS = ("please", "pls", "kindly", "also", "and", "so", "oh", "ok", "okay", "now", "hey",
           "hi", "btw", "then", "first", "next", "alright", "right", "well", "um", "uh",
           "one more thing")
LEADING_FILLERS = re.compile(r"^\W*(?:(?:" + "|".join(FILLERS) + r")\b\W*)*", re.I)

KEEP_ELSEWHERE = ("merk dir", "merke dir", "notier", "notiere", "vergiss nicht",  # de
                  "retiens", "souviens-toi", "note que", "notez que", "note bien",  # fr
                  "notez bien", "n'oublie pas", "n’oublie pas",
                  "recuerda", "apunta", "anota", "no olvides")  # es
KEEP_ELSEWHERE_PATTERN = "(?:" + "|".join(re.escape(p) for p in KEEP_ELSEWHERE) + ")"

_WORD = re.compile(r"[\w']+")


def words(text: str) -> list[str]:
    """The words of ``text``, lower-cased, with their apostrophes."""
    return _WORD.findall(text.lower().replace("’", "'"))
