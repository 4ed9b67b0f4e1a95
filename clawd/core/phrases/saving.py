"""The English of a reply that says a note was (or is about to be) saved.

Used by ``guards.claims.note_claim``: a sentence whose ``SPEAKER`` is the model ("I",
"I've", "Let me") with a verb that saves on its own (``SAVE_VERBS``: note, save, record,
remember, keep in mind …) or one that needs a note-like object (``SAVE_VERBS_WITH_OBJECT``
with ``NOTE_OBJECT``: add to memory, write to a ``.md`` file …); the passive forms ("Note
added: …", "Saved to memory/…", "… has been saved": ``PASSIVE_CLAIMS``); and what undoes a
claim (``NEGATION``; before a passive one, ``SAYS_NONE``: "No notes were saved") or makes a
recalling verb one (``ASPECT``: "I'll remember", "I've noted", against "I remember that …":
``RECALL_VERBS``).
"""

from __future__ import annotations

import re

from clawd.core import phrases

SAVE_VERBS = (r"(?:not(?:ed|e|ing)|sav(?:ed|e|ing)|record(?:ed|ing)?|remember(?:ed|ing)?|"
              r"stor(?:ed|e|ing)|logg(?:ed|ing)|log|jott(?:ed|ing)|jot|"
              r"(?:keep|kept|keeping) (?:that|this|it) in mind|"
              r"(?:write|wrote|written|writing) (?:that|this|it) down)")
# "I remember that …", "I noted earlier …", "I keep in mind …": recalling, not saving; these
# verbs count only with a future, perfect or progressive form, or "let me"
RECALL_VERBS = re.compile(r"not(?:e|ed)|remember(?:ed)?|keep .*|kept .*")
ASPECT = re.compile(r"'ll|’ll|will|shall|going to|'ve|’ve|have|'m|’m|am|let me|I'd like to",
                    re.IGNORECASE)
# "I remember this." after a statement: the model saying it kept it, not recalling anything
BARE_OBJECT = re.compile(r"\s+(?:this|that|it)\s*[.!]*\s*$", re.IGNORECASE)
SAVE_VERBS_WITH_OBJECT = (r"(?:add(?:ed|ing)?|writ(?:e|ten|ing)|wrote|append(?:ed|ing)?|"
                          r"updat(?:ed|e|ing)|put(?:ting)?|keep(?:ing)?|kept|creat(?:e|ed|ing)|"
                          r"mak(?:e|ing) a note|made a note)")
SPEAKER = (r"(?:\bI(?:'ve|’ve| have|'ll|’ll| will|'m|’m| am|'m going to| am going to| shall|"
           r" need to)?"
           r"(?: also| now| just| already| go ahead and)?|\blet me|\bI'd like to)")
NOTE_OBJECT = re.compile(r"\bmemor(?:y|ies)\b|\bnotes?\b|\blog\b|daily log|MEMORY\.md|\.md\b",
                         re.IGNORECASE)
NEGATION = re.compile(r"\b(?:not|never|cannot|can't|can’t|won't|won’t|didn't|didn’t|"
                      r"haven't|haven’t|unable|if|whether|should|shall I|would you|"
                      r"do you want)\b", re.IGNORECASE)
# "No notes were saved", "nothing added": a passive claim of none
SAYS_NONE = re.compile(r"\b(?:" + "|".join(sorted(phrases.NONE_WORDS)) + r")\b", re.IGNORECASE)
CLAIM = re.compile(rf"{SPEAKER}\s+(?P<verb>{SAVE_VERBS}|{SAVE_VERBS_WITH_OBJECT})\b",
                   re.IGNORECASE)
DONE_VERBS = r"added|saved|recorded|stored|written|appended|logged|updated"
DONE_ALONE = frozenset({"saved", "recorded", "stored", "logged"})  # need no object
PASSIVE_CLAIMS = (  # "Note added: …", "Saved to memory/…", "Your budget has been saved."
    re.compile(rf"^\W*(?:(?:the|a|your) )?(?:notes?|it|this|that)\s+"
               rf"(?:(?:has|have) been |is now |is |was )?(?P<verb>{DONE_VERBS})\b",
               re.IGNORECASE),
    re.compile(rf"^\W*(?P<verb>{DONE_VERBS})\s+(?:to|in|it|that|this)\b", re.IGNORECASE),
    re.compile(rf"\b(?:has|have) been (?P<verb>{DONE_VERBS})\b", re.IGNORECASE))
