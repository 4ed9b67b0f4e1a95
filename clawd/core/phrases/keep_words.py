"""The English of asking for something to be kept, and of what a request is about.

Used by ``context.requests``: an order at a sentence's start (``KEEP_ORDER``: "Remember …",
"Please note …", "Don't forget …", "Add to your notes …", "Save a note that …"; in German,
French and Spanish ``KEEP_ORDER_ELSEWHERE``), asked (``KEEP_ASKED``: "Can you remember
…?") or wanted (``KEEP_WANTED``: "I want you to remember …"), a file to read and then keep
(``READ_THEN_KEEP``); nostalgia is not a request (``REMEMBER_WHEN``: "Remember when we …").
``ABOUT_STOP_WORDS``: the words of asking, left out of what a request is about.
"""

from __future__ import annotations

import re

from clawd.core import phrases

LEAD = phrases.LEADING_FILLERS.pattern
# "save", "store", "record" and "log" alone are a coding assistant's everyday verbs ("save the
# file as report.md"): they count only when what they save into is memory or notes
INTO_NOTES = r"(?:to|in|into) (?:your |the |my )?(?:notes|memory|memories|daily log|log)"
KEEP_VERB = (r"(?:remember|note(?: down)?|(?:save|store|record|log) (?:this|that|it) "
             + INTO_NOTES + r"|(?:save|store|record|log)(?= .*\b" + INTO_NOTES + r")|"
             r"keep(?= .*\b" + INTO_NOTES + r")|jot (?:down|this|that|it)|"
             r"write (?:this|that|it) down|write down|keep (?:this|that|it) in mind|"
             r"keep in mind|make a note|take a note|don't forget|don’t forget|"
             + phrases.SAVE_A_NOTE + r"(?= that\b| saying\b| about\b|\s*:)|"
             r"do not forget|add (?:this|that|it )?(?:to )?(?:your |the )?"
             r"(?:notes|memory|memories|daily log|log)|put (?:this|that|it) in your notes)")
KEEP_ORDER = re.compile(LEAD + KEEP_VERB + r"\b", re.IGNORECASE)
KEEP_ASKED = re.compile(r"\b(?:can|could|would|will) you (?:please |also )?" + KEEP_VERB + r"\b",
                        re.IGNORECASE)
KEEP_WANTED = re.compile(r"\bI(?:'d| would)? (?:want|like|need) you to (?:please )?" + KEEP_VERB
                         + r"\b", re.IGNORECASE)
# "Read notes/router.txt and keep the admin port in your notes": a file to read, then keep
READ_THEN_KEEP = re.compile(LEAD + r"(?:read|open|check|look (?:at|in|through)|go through)\b"
                            r".*?(?:\band\b|\bthen\b|,)\s*(?:then\s+)?(?:please\s+)?"
                            + KEEP_VERB + r"\b", re.IGNORECASE)
REMEMBER_WHEN = re.compile(r"^\W*remember when\b", re.IGNORECASE)  # nostalgia, not a request
KEEP_ORDER_ELSEWHERE = re.compile(LEAD + phrases.KEEP_ELSEWHERE_PATTERN + r"\b", re.IGNORECASE)
# what a request to remember is about leaves out the words of asking
ABOUT_STOP_WORDS = phrases.FUNCTION_WORDS | frozenset("""also please remember note notes save store
record log keep mind forget don't dont write add memory jot make take like want need that's
i'm i've i'll i'd im ive we're we've""".split())
# a request to be told something later ("Remind me tomorrow at 9 to call the landlord", "set
# a reminder", "ping me in 20 minutes"), not a question about the past ("Remind me what we
# decided about the API"): the reminder's verb, then a time or what to do
_LATER = (r"(?:to |at |in (?:\d|an? |a few |half )|on |tomorrow|tonight|next |every |later|"
          r"this (?:morning|afternoon|evening|week|weekend)|before |after |around |by )")
REMIND_LATER = re.compile(
    r"\bremind (?:me|us)(?: again| please| later)?,? " + _LATER
    + r"|\bset (?:me |up )?(?:a |an )?(?:reminder|alarm|timer)\b"
    + r"|\b(?:notify|alert|ping|text|message|wake|call) me (?:at |in (?:\d|an? |half )|on |"
      r"tomorrow|tonight|next |every |later)"
    + r"|\b(?:don't|do not) let me forget to\b", re.IGNORECASE)
