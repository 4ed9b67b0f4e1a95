"""Phrases the runtime recognises in people's words, each list once, named for what it is.

The fact selector (``context.facts``), the request detector (``context.requests``), the
correction reader (``context.corrections``), recall's gate (``loop.recall``), the flush
(``context.flush``) and the guards (``guards.claims``, ``guards.junk_notes``,
``guards.founded``, ``guards.reading``, ``guards.replytext``) read the user's and the
model's sentences by their words, without a model. Their English (and the few phrases of
other languages) lives in this package:

- ``talk``: small talk, questions, asking for work, asking to be reminded;
- ``keep_words``: asking for something to be kept ("Remember …", "Can you note …?");
- ``saving``: a reply saying a note was saved ("I've noted that", "Saved to memory/…");
- ``changes``: a sentence that replaces a value said before ("moved from … to …");
- ``answers``: a model's short answers about notes (a bare "Done.", "- No more notes.",
  "- I remember …").

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
  of what a request to remember is about. ``PLAIN_WORDS`` are the commonest of them, and
  ``PERSONS`` their pronouns; ``NOTE_FRAME`` and ``NOTE_PLAIN`` add how notes name the user
  (``THE_USER``); ``NONE_WORDS`` say there is none.
- ``ENDINGS``: what a word's other forms end in, taken off to compare them
  (``context.requests.stem``).
- ``words``: a text's words, lower-cased, apostrophes kept ("don't", "I'm"; a curly one
  read as straight); ``without_possessive``: a word with its "'s" taken off ("Noor's" as
  "Noor"), for the correction reader and consolidation alike.

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

# the pronouns a sentence about someone is framed in ("she", "their", "my")
PERSONS = frozenset("i my we our he his she her they their".split())
# the commonest of them: articles, pronouns, "is", "of", "with" (a note's words that say
# nothing of its own, ``guards.junk_notes``)
PLAIN_WORDS = PERSONS | frozenset("""a an the and or of to in on at for with from by as is
are was were be it its this that me you your""".split())
FUNCTION_WORDS = PLAIN_WORDS | frozenset("""
about above after again against all am any because been before being below between both but
can could did do does doing down during each few further had has have having here hers
herself him himself how if into itself just more most myself no nor not now off once only
other ours ourselves out over own same should so some such than theirs them themselves then
there these those through too under until up very what when where which while who whom why
will would yours yourself yourselves s t d ll m re ve
""".split())
# how notes name the person they are about ("The user's sister …")
THE_USER = frozenset("user user's".split())
# the words a note about someone is framed in: none of them is a name, capitalised or not
NOTE_FRAME = PERSONS | THE_USER | frozenset({"the"})
# a note's words that say nothing of its own (``guards.junk_notes``: neither counted nor repeated)
NOTE_PLAIN = PLAIN_WORDS | THE_USER | frozenset({"users"})
# the words that say there is none ("No notes to add", "nothing new")
NONE_WORDS = frozenset({"no", "none", "nothing"})
# the endings of a word's other forms, longest first ("moved", "moves", "moving" → "mov")
ENDINGS = ("ing", "ed", "es", "s", "e")

_WORD = re.compile(r"[\w']+")


def words(text: str) -> list[str]:
    """The words of ``text``, lower-cased, with their apostrophes."""
    return _WORD.findall(text.lower().replace("’", "'"))


def without_possessive(word: str) -> str:
    """``word`` without a possessive "'s" (straight or curly) at its end."""
    return word[:-2] if word.endswith(("'s", "’s")) else word
