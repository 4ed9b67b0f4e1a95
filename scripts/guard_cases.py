"""Good replies in the style of a strong hosted model, for ``bench_guards.py``: none of the
step guards may act on them. Each is a user's message, the reply, and what the turn did
(``wrote``: a file write succeeded in it; ``before``: the conversation before it). Built into
cases of the labelled set with ``python scripts/bench_guards.py merge``; the instructions the
model was shown are those of a fresh ``clawd init`` (taken from a collected case).
"""

from __future__ import annotations

CODE = '''Here is a straightforward version that checks divisors up to the square root:

```python
import math


def is_prime(n: int) -> bool:
    """Whether n is a prime number."""
    if n < 2:
        return False
    if n in (2, 3):
        return True
    if n % 2 == 0:
        return False
    for d in range(3, math.isqrt(n) + 1, 2):
        if n % d == 0:
            return False
    return True
```

It runs in O(√n). For many numbers at once, a sieve of Eratosthenes is faster.'''

TABLE = '''| Trip | From | Time | Why go |
|---|---|---|---|
| Sintra | Rossio station | 40 min by train | palaces and gardens in the hills |
| Cascais | Cais do Sodré | 35 min by train | beaches and the old fishing town |
| Évora | Sete Rios | 1 h 30 by bus | Roman temple and the bone chapel |

Go to Sintra on a weekday: it is very crowded at weekends.'''

PLAN = '''## A week in Lisbon in May

**Weather.** Expect 17–24 °C, sunny with the odd shower.

### Clothes
- light layers and one warm sweater for the evenings
- comfortable shoes with grip: the pavements are polished stone
- a light rain jacket

### Documents
- passport or ID, boarding passes for **May 2**
- travel insurance details

### Small things
1. a refillable water bottle
2. sunscreen and sunglasses
3. a European plug adapter if you come from outside the EU

> Tip: leave room in your bag for a tin of sardines or two.'''

YAML = '''```yaml
trip:
  city: Lisbon
  flight: 2026-05-02
  budget_eur: 2400
  travellers:
    - me
    - Ines
```'''

CASES = [
    # (name, user's message, reply text, tool calls, wrote, the conversation before)
    ("json-fenced", "Give me a JSON object with fields city and budget for my Lisbon move.",
     '```json\n{"city": "Lisbon", "budget": 1400}\n```', [], False, []),
    ("json-plain", "Return my trip as JSON, nothing else.",
     '{"city": "Lisbon", "flight": "2026-05-02", "budget": 2400}', [], False, []),
    ("json-call-example", "Show me what an OpenAI tool call looks like, as JSON.",
     '```json\n{"name": "get_weather", "arguments": {"city": "Lisbon"}}\n```', [], False, []),
    ("json-list", "List three day trips from Lisbon as a JSON array with name and minutes.",
     '[{"name": "Sintra", "minutes": 40}, {"name": "Cascais", "minutes": 35}, '
     '{"name": "Évora", "minutes": 90}]', [], False, []),
    ("code", "Write a Python function that checks whether a number is prime.", CODE, [],
     False, []),
    ("table", "Make a markdown table of three day trips from Lisbon with travel times.",
     TABLE, [], False, []),
    ("plan", "I decided we'll fly on May 2. Suggest what to pack for a week.", PLAN, [],
     False, []),
    ("yaml", "Write my trip details as YAML.", YAML, [], False, []),
    ("xml-tools", "Show me a small XML example with a <tools> element.",
     '```xml\n<tools>\n  <tool name="hammer"/>\n  <tool name="saw"/>\n</tools>\n```', [],
     False, []),
    ("true-remember", "Where does my sister live?",
     "I remember you told me your sister Ines lives in Porto.", [], False,
     [("user", "My sister Ines lives in Porto."), ("assistant", "Nice, Porto is lovely.")]),
    ("saved-after-write", "Please remember that my dentist appointment is on March 3.",
     "I've saved that to memory/2026-11-28.md: dentist on March 3.", [], True, []),
    ("noted-after-write", "Note that I switched my phone plan to Vodafone.", "Noted.", [],
     True, []),
    ("will-remember-after-write", "Remember that the landlord is called Mr. Duarte.",
     "Got it, I'll remember that your landlord is Mr. Duarte.", [], True, []),
    ("cannot-save", "Can you keep this in mind for next time?",
     "I can't keep anything past this chat unless it is written down; shall I add it to "
     "today's notes?", [], False, []),
    ("offer-to-save", "My gym is open until 22:00.",
     "Good to know. Should I save this to your notes?", [], False, []),
    ("noted-earlier", "Is the museum open tomorrow?",
     "Tomorrow is Monday, and as I noted earlier, most museums in Lisbon close on Mondays.",
     [], False, [("user", "Which day are museums closed?"),
                 ("assistant", "Most museums in Lisbon close on Mondays.")]),
    ("same-answer-same-question", "What is the capital of Portugal?",
     "The capital of Portugal is Lisbon.", [], False,
     [("user", "What is the capital of Portugal?"),
      ("assistant", "The capital of Portugal is Lisbon.")]),
    ("repeat-after-me", "Repeat after me: the quick brown fox jumps over the lazy dog.",
     "The quick brown fox jumps over the lazy dog.", [], False, []),
    ("translate", "Translate 'good morning, how are you' into Portuguese.",
     "Bom dia, como está?", [], False, []),
    ("short-yes", "Is Lisbon the capital of Portugal?", "Yes.", [], False, []),
    ("numbered-days", "Give me a 10-day walking plan, one line a day.",
     "\n".join(f"{i}. Day {i}: walk {i + 2} km along the river" for i in range(1, 11)), [],
     False, []),
    ("count", "Count from 1 to 40, one number per line.",
     "\n".join(str(i) for i in range(1, 41)), [], False, []),
    ("how-notes", "How do you keep notes about me?",
     "I keep them as Markdown files in your workspace: a daily log per day under memory/, "
     "and lasting facts in MEMORY.md. You can read and edit them yourself.", [], False, []),
    ("text-with-read", "What did I note about the flat?",
     "Let me look at your notes from that day.",
     [("read", {"path": "memory/2026-11-20.md"})], False, []),
    ("good-note", "By the way, my flat budget is 1,400 euros a month.",
     "", [("write", {"path": "memory/2026-11-28.md", "append": True,
                     "content": "- Flat budget in Lisbon: 1,400 euros a month\n"})], False, []),
    ("headed-note", "Please remember: Ines visits on December 12, and she is vegetarian.",
     "", [("write", {"path": "memory/2026-11-28.md", "append": True,
                     "content": "## Ines\n- visits on December 12\n- vegetarian\n"})],
     False, []),
    ("json-file", "Save my trip as trip.json in the workspace.",
     "", [("write", {"path": "trip.json",
                     "content": '{"city": "Lisbon", "flight": "2026-05-02", "budget": 2400}'})],
     False, []),
    ("exec-poll", "Run the tests and tell me when they pass.",
     "", [("exec", {"command": "pytest -q"})], False, []),
    ("long-answer", "Explain how the Lisbon tram 28 works.",
     "Tram 28 runs from Martim Moniz to Campo de Ourique through Graça, Alfama, Baixa and "
     "Estrela. It uses the same Viva Viagem card as the metro; a ride costs less with a "
     "loaded card than with a ticket bought on board. Trams come every 10–15 minutes. It is "
     "crowded from mid-morning, so board at Martim Moniz early, or ride tram 12 for a shorter "
     "loop through the same streets. Keep an eye on your pockets: it is known for "
     "pickpockets.", [], False, []),
]
