"""The English of what people say to an assistant: small talk, questions, requests for work.

Used by ``context.facts`` (which sentences of a message are facts to keep) and ``loop.recall``:

- ``CHATTER``, ``SMALL_TALK``, ``ABOUT_A_QUESTION``: talk about the conversation itself
  ("ok cool", "Hello, this is a test", "I have a question");
- ``QUESTION_START``: a sentence that opens as a question without its question mark;
- ``POLITE``, ``WANT_WORK``, ``IMPERATIVES``, ``NEGATIVE_ORDER``: asking for something to be
  done ("Could you …", "I'd like a list …", "Suggest …", "Don't book …"), and
  ``SUBJECT_VERBS``, the verbs after a first word that make it a noun ("Work starts at 9");
- ``KEEP_CLAUSE``: the words that ask for the rest of a sentence to be kept ("Remember that",
  "Merk dir");
- ``REMIND``, ``OWN_WORDS``: asking for what was said before, and speaking of oneself;
- ``ABOUT_YOU``: a sentence about the assistant or its answer ("You're right");
- ``ABOUT_A_FILE``, ``ABOUT_INSTRUCTIONS``: asking what a file says (``guards.reading``), and
  asking about the instructions themselves (``guards.replytext``).
"""

from __future__ import annotations

import re

from clawd.core import phrases

# A greeting, thanks or a word of assent, alone or before "this is a test": talk about the
# conversation itself, never a fact to keep ("Hello, **this** is a test of the `REPL`").
GREETING = (r"(?:hello|hi|hey|hiya|howdy|good (?:morning|afternoon|evening)|thanks|"
            r"thank you|ok|okay|cool|great|nice)")
CHATTER = re.compile(rf"(?:{GREETING}\b[\s,.!]*)*(?:(?:this|it)(?:'s| is) (?:just |only )?"
                     rf"(?:a |another )?test(?: message| run| of (?:the |this |my )?\w+)?"
                     rf"|testing(?:[ ,]+(?:one|two|three|1|2|3))*|)", re.I)
# the words of talk about the conversation: a sentence made only of them keeps nothing
# ("ok cool", "That makes sense.", "That's not what I meant.", "haha that's funny")
SMALL_TALK = frozenset("""ok okay cool great nice thanks thank you so much very lot yes no
yeah yep yup nope sure alright right perfect awesome excellent fine good morning afternoon
evening night bye goodbye see later hello hi hey sounds that that's this it it's makes make
sense never mind got gotcha wow interesting exactly indeed me to for is the a an oh ah well
haha hahaha lol lmao hmm hm um uh funny what meant mean not i i'm all set true agreed deal
done noted understood helpful works worked idea there we go let's go test testing again
too really just""".split())
ABOUT_A_QUESTION = re.compile(r"^I(?: have|'ve got| got) (?:a|one|another|some|two|a few)"
                              r"(?: \w+)? questions?\b", re.I)
AUXILIARY = (r"(?:is|are|was|were|am|do|does|did|can|could|would|will|should|shall|have|has|had|"
             r"may|might|must|isn't|aren't|don't|doesn't|didn't|can't|won't|wouldn't|shouldn't)")
PRONOUN = r"(?:i|you|u|we|he|she|it|they|there)"
DETERMINER = r"(?:the|a|an|my|your|our|this|that|these|those)"
WH_WORD = r"(?:what|what's|whats|how|how's|why|which|who|who's|whose|whom)"
QUESTION_START = re.compile(
    rf"^(?:{WH_WORD}\b|(?:when|where)(?:'s|\s+{AUXILIARY}\b)|{AUXILIARY}\s+{PRONOUN}\b|"
    rf"(?:is|are|does|do|can|could|will|would|should)\s+{DETERMINER}\b|"
    r"any (?:idea|ideas|chance|tips|thoughts|suggestions)\b|anyone know\b|"
    r"i wonder\b|i(?:'m| am| was) wondering\b|do you think\b)", re.I)
POLITE = re.compile(r"\b(?:can|could|would|will|won't|can't) (?:you|u)\b|\bwould you mind\b|"
                    r"\b(?:i'?d|i would) (?:like|love|appreciate) (?:it if )?(?:you|u)\b|"
                    r"\bi (?:want|need) (?:you|u) to\b|\bplease\b|"
                    r"\blet'?s\b|\blet us\b|\blet me know\b", re.I)
# "I'd like a list …", "I need a packing list …": asking for a piece of work, not a plan
PIECE_OF_WORK = (r"(?:list|summary|plan|draft|recap|overview|suggestions?|recommendations?|"
                 r"breakdown|explanation|table|script|email|letter|outline|comparison|estimate|translation|"
                 r"rewrite|review|hand|ideas?|examples?|itinerary|checklist|template|answer|"
                 r"advice|tips?|quote)")
WANT_WORK = re.compile(r"^i(?:'d| would)? (?:like|want|need|could use) (?:a|an|some|the|"
                       rf"your|another)?\s*(?:[\w-]+ )?{PIECE_OF_WORK}\b", re.I)
# the verbs a request starts with ("Suggest …", "Book a table …", "Don't book …")
IMPERATIVES = frozenset("""suggest read tell give find show write make list explain summarise
summarize check book plan draft translate help send create compare recommend look search
calculate convert fix open run add remind describe generate rewrite edit review update
delete remove set schedule buy order email text get fetch download install print count sort
format name pick choose recap outline estimate figure work go keep turn change rename try
think brainstorm proofread correct analyse analyze debug refactor move start stop cancel
call ask answer reply respond continue repeat use put take bring prepare organise organize
arrange sum tally quote cite define compute draw sketch design build compose jot note save
store record log remember forget look google research investigate verify confirm double
clean tidy split merge shorten expand simplify improve polish reword rephrase paraphrase
walk guide teach show""".split())
# after a first word that is a noun, not an order: "Work starts at 9.", "Plan is to leave"
SUBJECT_VERBS = frozenset("""is are was were 's will would has had starts started ends
ended begins began takes took costs cost runs ran went goes lasts""".split())
NEGATIVE_ORDER = re.compile(r"^(?:don't|dont|do not|never)\s+(\w+)", re.I)
KEEP_CLAUSE = re.compile(
    r"^\W*(?:(?:can|could|would|will) (?:you|u) (?:please |also )?|i(?: want| need|'d like|"
    r"’d like| would like) you to (?:please )?)?(?:remember|note(?: down)?|keep in mind|"
    r"(?:don't|don’t|do not) forget|make a note(?: of)?|take a note(?: of)?|write down|"
    + phrases.SAVE_A_NOTE + r"(?: saying)?|jot down|" + phrases.KEEP_ELSEWHERE_PATTERN
    + r")(?: (?:this|that))?\s*(?:(?:that|dass|que)\b|:|,|-|–)?\s*", re.I)

# a message asking for what was said before ("remind me", "look up"), and speaking of oneself
# (``loop.recall.wants_recall``)
REMIND = re.compile(r"\b(?:remind|recall|look up|find)\b", re.I)
OWN_WORDS = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|my|mine|myself|we|we're|we've|our|ours|us)\b",
                       re.I)
# a sentence about the assistant or its answer ("You're right", "Your list is long"), not
# about the user
ABOUT_YOU = re.compile(r"(?:you|you're|you are|your)\b", re.I)
# a message that asks what a file says: to read it, or a question ("store alpha in notes.md"
# asks to write one)
ABOUT_A_FILE = re.compile(r"\b(?:read|open|check|look|see|summari[sz]e|tell|show|say|says|said|"
                          r"what|which|who|whom|where|when|how|find|according)\b", re.I)
# a message about the instructions (a file, the rules, the prompt): a quote of them answers it
ABOUT_INSTRUCTIONS = re.compile(
    r"\.md\b|\binstruction|\brules?\b|\bprompt|\bguideline|\bagents\b|\bsoul\b|\btools\b",
    re.IGNORECASE)
