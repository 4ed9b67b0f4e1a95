"""Phrases the runtime recognises in people's words, each list once, named for what it is.

The fact selector (``context.facts``), the request detector (``context.requests``), recall's
gate (``loop.recall``), the flush (``context.flush``) and the guards (``guards.claims``,
``guards.notes``) read the user's and the model's sentences by their words, without a
model. Their English (and the few phrases of other languages) lives in this package:

- ``talk``: small talk, questions, asking for work, asking to be reminded;
- ``keeping``: asking for something to be kept ("Remember …", "Can you note …?");
- ``saving``: a reply saying a note was saved ("I've noted that", "Saved to memory/…");
- ``changes``: a sentence that replaces a value said before ("moved from … to …").

A new pattern comes with its figures (``scripts/bench_fact_selection.py``,
``scripts/bench_guards.py``, ``scripts/bench_turn_guards.py``,
``scripts/bench_junk_notes.py``). What they all share is here:

- ``FILLERS``: words before a sentence proper that change nothing ("So, please …", "Oh and
  also …", "One more thing: …"); ``LEADING_FILLERS`` matches the run of them (maybe
  none) at the start.
- ``KEEP_ELSEWHERE``: asking for something to be kept in German, French and Spanish ("Merk
  dir …", "N'oublie pas …", "Recuerda que …"), beside the English verbs of
  ``context.requests``.
- ``FUNCTION_WORDS``: English words that carry no topic of their own ("the", "about",
  "would"): left out of keyword queries, of a slug, and (with the words of asking to keep)
  of what a request to remember is about.
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
# "save a note that …": a note with what it says, which a file is not ("save the note file")
SAVE_A_NOTE = r"(?:save|store|keep) (?:a|one) (?:quick |short |little )?note"

FUNCTION_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its
itself just me more most my myself no nor not now of off on once only or other our ours
ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were
what when where which while who whom why will with would you your yours yourself yourselves
s t d ll m re ve
""".split())

_WORD = re.compile(r"[\w']+")


def words(text: str) -> list[str]:
    """The words of ``text``, lower-cased, with their apostrophes."""
    return _WORD.findall(text.lower().replace("’", "'"))
