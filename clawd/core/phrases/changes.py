"""The English of a change: a sentence that replaces a value said before.

Used by ``context.facts`` to tell which older note a new fact supersedes: "… now, not …"
(``NOT_OLD``), "moved from … to …" (``FROM_TO``), "… instead of …" (``INSTEAD_OF``), a
correction's opening ("Actually", "Sorry, I meant": ``CORRECTION``), and the word before a
new value ("is called", "I meant": ``VALUE_AFTER``). Beside ``context.corrections``: a
title's full stop ("Dr. Costa": ``TITLE_STOP``) ends no value, and the name after a title
(``TITLED_NAME``) is a name; a sentence's opening that only says it corrects
(``OPENING``), a verb that carries a new value ("now works at": ``NOW_VERB``,
``VERB_NOW``), a move (``MOVE``) and a line that says where someone is (``PLACE``), and
what follows a subject in a line that gives it a value (``STATES``, ``MOVED_STATES``).
"""

from __future__ import annotations

import re

VALUE_END = r"(?=\s+(?:now|last|this|next|since|from|on|in|at|today|yesterday|instead)\b|[,.;!]|$)"
NOT_OLD = re.compile(r"^(?P<before>.+?)(?:\s+now\s*,?|\s*,)\s+(?:and )?not\s+(?P<old>[^,.;!?]+?)"
                     r"(?:\s+(?:anymore|any more|any longer))?\s*(?:[,.;!?]|$)", re.I)
FROM_TO = re.compile(r"\b(?:moved|switched|changed|upgraded|downgraded|migrated|shifted|"
                     r"swapped|went|converted|transferred|moving|switching|changing)\b.*?"
                     rf"\bfrom\s+(?P<old>.+?)\s+to\s+(?P<new>.+?){VALUE_END}", re.I)
INSTEAD_OF = re.compile(r"^(?P<before>.+?)\s+instead of\s+(?P<old>[^,.;!?]+)", re.I)
CORRECTION = re.compile(r"^\W*(?:actually|correction|sorry|oops|no wait|wait|scratch that|"
                        r"my (?:mistake|bad)|i meant|to correct)\b", re.I)
# the last word before a new value: "is called wren", "it's Maria", "I meant Tuesday"
VALUE_AFTER = re.compile(r".*\b(?:is|are|was|were|it's|its|called|named|meant|mean|be|"
                         r"'s|take|use|using|got|get|prefer|with|at|on|to)\s+(?P<value>.+)$",
                         re.I)
# "Sam is here now": the word that dates a value, not part of it
NOW_AT_VALUE_END = re.compile(r"\s+now$", re.I)
# "… do, not …", "… is, not …": a question or an answer of yes or no, not a value replaced
AUXILIARY_AT_END = re.compile(
    r"\b(?:do|does|did|am|is|are|was|were|can|could|will|would|have|has)\s*$", re.I)
_TITLES = "Dr|Mr|Mrs|Ms|Prof|St"
TITLED_NAME = re.compile(rf"\b(?:{_TITLES})\.? ([A-Z][\w-]+)")  # "Dr. Costa": Costa
TITLE_STOP = re.compile(rf"\b({_TITLES})\.\s")  # the full stop after a title
DETERMINERS = frozenset("the a an my our his her their your this that".split())
# "Miso's vet is now Dr. Costa", "my address is Rua Nova 5 now", "the meeting changed to
# Friday": a new value with no old one named, and what it is the value of
IS_NOW = re.compile(r"^(?P<subject>.+?)\s+(?:is|are|'s)\s+now\s+(?P<new>[^,;!?]+?)"
                    r"(?=\s*(?:[,;!?]|\.(?:\s|$)|$))", re.I)
NOW_AT_END = re.compile(r"^(?P<subject>.+?)\s+(?:is|are)\s+(?P<new>[^,;!?]+?)\s+now\s*"
                        r"(?:[,;!?]|\.(?:\s|$)|$)", re.I)
CHANGED_TO = re.compile(r"^(?P<subject>.+?)\s+(?:has |have )?(?:changed|moved(?: back)?|"
                        r"switched|relocated|been moved|been changed)\s+to\s+"
                        r"(?P<new>[^,;!?]+?)(?=\s*(?:[,;!?]|\.(?:\s|$)|$))", re.I)
# "Leo now studies at …", "Karen works at Bosch now", "the club meets on Thursdays now":
# a verb that carries the value (its subject's words with it, but where someone lives)
_VERBS = (r"(?:lives?|stays?|resides?|works?|stud(?:y|ies)|teach(?:es)?|meets?|plays?|"
          r"trains?|starts?|begins?|ends?|opens?|closes?|leaves?)")
_AFTER_VERB = r"\s+(?:in|at|on|for|from|with)\s+(?P<new>[^,;!?]+?)"
NOW_VERB = re.compile(rf"^(?P<subject>.+?)\s+now\s+(?P<verb>{_VERBS}){_AFTER_VERB}"
                      r"(?=\s*(?:[,;!?]|\.(?:\s|$)|$))", re.I)
VERB_NOW = re.compile(rf"^(?P<subject>.+?)\s+(?P<verb>{_VERBS}){_AFTER_VERB}\s+now\s*"
                      r"(?:[,;!?]|\.(?:\s|$)|$)", re.I)
LIVES = re.compile(r"^(?:lives?|stays?|resides?)$", re.I)
# a new value with no old one named, and what it is the value of, tried in this order
NEW_VALUE = (IS_NOW, NOW_AT_END, CHANGED_TO, NOW_VERB, VERB_NOW)
# how a sentence opens to say it corrects or updates, not what it changes: "Correction:",
# "Quick update:", "FYI -", "Actually,", "Sorry,", "Oh, and", "By the way,"; a label needs
# its colon, comma or dash ("Update my notes: …" asks)
OPENING = re.compile(r"^\W*(?:(?:(?:a|one|quick|small|little|short)\s+)?(?:correction|update|"
                     r"fix|edit|note|ps|erratum)\s*[:,!–—-]+|(?:actually|sorry|oh,? and|oh|"
                     r"also|and|fyi|heads up|btw|by the way|oops|no wait|wait|scratch that|"
                     r"my (?:mistake|bad))\b[\s:,!–—-]*)\s*", re.I)
# a change of where someone is ("Tom moved to Oslo"), and a note line that says where
# someone is ("Tom lives in Bergen", "she is based in Tromsø")
MOVE = re.compile(r"\b(?:moved|moving|moves|relocated|relocating|relocates)\b", re.I)
PLACE = re.compile(r"\b(?:lives?|living|lived|moved|moving|relocated|based|located|resides?|"
                   r"residing|home|address|stays?|staying)\b|\b(?:is|are|was|were)\s+(?:now\s+|"
                   r"still\s+|currently\s+)?(?:in|at)\b", re.I)
# what follows a subject's word in a line that gives the subject a value: "… is …", "…: …",
# "… on …" (after a move, "… is on …", "… at …": a meeting moved, not a person's trade)
_IS = r"\s(?:(?:currently|still|now|also|usually)\s+)?(?:is|are|was|were)"
STATES = rf"[\w'’]*\s*(?::|=|\s[–—-]\s|{_IS}\b|\s+(?:on|at)\b)"
MOVED_STATES = rf"[\w'’]*\s*(?::|(?:{_IS})?\s+(?:on|at|in|to|from)\b)"
# the words that say a change and name no subject: left out of what a change is about
CHANGE_WORDS = frozenset("""now not no longer anymore any more instead actually correction
sorry oops wait scratch that meant mean update updated please notes note retired left gone
new old from to""".split())
# words before a change's verb that name nothing it changes ("I just moved to Utrecht", "we
# finally switched to Go"): a subject of these alone is no subject
NO_SUBJECT = frozenset("""i we you he she they it just finally recently already still also
really actually officially eventually""".split())
